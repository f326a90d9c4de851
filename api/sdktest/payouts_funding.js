'use strict';
// Drives intasend-node@1.1.2's payouts() calls where the SDK meets paysvc's rules: an
// underfunded approval, bank codes as IntaSend's examples write them, and the
// forms of a P2P (INTASEND) account.
//
//   PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \
//   PAYSVC_SETTLEMENT_WALLET=<the merchant's KES settlement wallet, holding 500.00> \
//   PAYSVC_WORKING_WALLET=<the merchant's KES working wallet, holding 1000.00> \
//   PAYSVC_RECIPIENT_WALLET=<another merchant's KES wallet> \
//   PAYSVC_RECIPIENT_EMAIL=<that merchant's email> node -r ./redirect.js payouts_funding.js
//
// Calls, in order:
//   underfunded        payouts().mpesa(...) requires_approval YES for 1000 (1010 with the fee)
//   approveUnderfunded payouts().approve(<the whole response>): must reject with 400
//   stillAwaiting      payouts().status(...): the file still awaits approval
//   topUp              wallets().intraTransfer(working -> settlement, 1000)
//   approveFunded      payouts().approve(<the same whole response>): PROCESSING
//   noApproval         payouts().mpesa(...) requires_approval NO the wallet cannot cover: 400
//   bank               payouts().bank(...) with bank_code "2" (unpadded, as IntaSend's examples)
//   p2pWallet, p2pEmail, p2pPhone  payouts().intasend(...) to a wallet id, an email, a phone
//   *Status            polled until final
// Output and exit codes: see harness.js.

const IntaSend = require('intasend-node');
const { harness } = require('./harness');

const intasend = new IntaSend(process.env.PAYSVC_PUBLIC_KEY, process.env.PAYSVC_SECRET_KEY, true);
const env = (name) => process.env[name] || '';
const { call, finish, skip } = harness({ timeoutMs: 50000 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const FINAL = ['COMPLETE', 'CANCELLED'];

function poll(file) {
  if (!file || !file.tracking_id) return skip('no tracking_id');
  return async () => {
    for (let i = 1; i <= 400; i++) {
      const s = await intasend.payouts().status({ tracking_id: file.tracking_id });
      if (FINAL.includes(s.status)) return s;
      await sleep(50);
    }
    throw new Error(`file ${file.tracking_id} never reached a final state`);
  };
}

const p2p = (account) => () => intasend.payouts().intasend({
  currency: 'KES',
  requires_approval: 'NO',
  transactions: [{ account, amount: 5, narrative: 'sdk p2p' }],
});

(async () => {
  const file = await call('underfunded', () => intasend.payouts().mpesa({
    currency: 'KES',
    requires_approval: 'YES',
    transactions: [{ name: 'Jane Doe', account: '254708374149', amount: '1000', narrative: 'Salary' }],
  }));
  const ok = file && file.tracking_id;
  await call('approveUnderfunded', ok ? () => intasend.payouts().approve(file) : skip('no file'));
  await call('stillAwaiting', ok ? () => intasend.payouts().status({ tracking_id: file.tracking_id }) : skip('no file'));
  await call('topUp', () => intasend.wallets().intraTransfer(env('PAYSVC_WORKING_WALLET'), env('PAYSVC_SETTLEMENT_WALLET'), 1000, 'top up'));
  await call('approveFunded', ok ? () => intasend.payouts().approve(file) : skip('no file'));
  await call('noApproval', () => intasend.payouts().mpesa({
    currency: 'KES',
    requires_approval: 'NO',
    transactions: [{ name: 'Too Much', account: '254708374149', amount: 150000, narrative: 'Salary' }],
  }));
  const bank = await call('bank', () => intasend.payouts().bank({
    currency: 'KES',
    requires_approval: 'NO',
    transactions: [{ name: 'Acme Supplies', account: '1234567890', bank_code: '2', amount: '100', narrative: 'Invoice 7' }],
  }));
  const byWallet = await call('p2pWallet', p2p(env('PAYSVC_RECIPIENT_WALLET')));
  const byEmail = await call('p2pEmail', p2p(env('PAYSVC_RECIPIENT_EMAIL')));
  await call('p2pPhone', p2p('254708374149'));

  await call('underfundedStatus', poll(file));
  await call('bankStatus', poll(bank));
  await call('p2pWalletStatus', poll(byWallet));
  await call('p2pEmailStatus', poll(byEmail));
  finish(0);
})();
