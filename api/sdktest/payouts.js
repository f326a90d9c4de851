'use strict';
// Drives intasend-node@1.1.2's payouts() calls against a local paysvc:
//
//   PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \
//   PAYSVC_RECIPIENT_WALLET=<another merchant's KES wallet> node -r ./redirect.js payouts.js
//
// Calls, in order (each on a fresh payouts() object, as the SDK's README does):
//   mpesa        payouts().mpesa(...) with requires_approval YES: 4 transactions, one to an
//                account ending 0011 (fails at the provider), one ending 0014 (answers late)
//   approve      payouts().approve(<the whole mpesa response>), as the SDK example does
//   approveAgain the same object approved again: must reject with 400 and a JSON detail
//   mpesaStatus  payouts().status({tracking_id}) polled until the file is final
//   bank         payouts().bank(...) (PESALINK, bank_code), requires_approval NO
//   b2b          payouts().mpesaB2B(...): a PayBill (account_reference) and a TillNumber
//   b2bExample   the SDK README's own B2B body (account as a JSON number, amount a string),
//                requires_approval YES and never approved, so it moves no money
//   p2p          payouts().intasend(...) to PAYSVC_RECIPIENT_WALLET
//   airtime      payouts().airtime(...)
//   bankStatus, b2bStatus, p2pStatus, airtimeStatus: polled until final
// Then "summary": per file {status, status_code, polls, transactions: [{account, status,
// status_code}]}. Output and exit codes: see harness.js.

const IntaSend = require('intasend-node');
const { harness } = require('./harness');

const intasend = new IntaSend(process.env.PAYSVC_PUBLIC_KEY, process.env.PAYSVC_SECRET_KEY, true);
const recipient = process.env.PAYSVC_RECIPIENT_WALLET;
const { call, finish, skip, results } = harness({ timeoutMs: 50000 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const FINAL = ['COMPLETE', 'FAILED', 'CANCELLED'];
const polls = {};

// poll asks for the file's status until it is final (up to ~20 s).
function poll(name, file) {
  if (!file || !file.tracking_id) return skip(`${name}: no tracking_id`);
  return async () => {
    for (let i = 1; i <= 400; i++) {
      const s = await intasend.payouts().status({ tracking_id: file.tracking_id });
      polls[name] = i;
      if (FINAL.includes(s.status)) return s;
      await sleep(50);
    }
    throw new Error(`file ${file.tracking_id} never reached a final state`);
  };
}

(async () => {
  const mpesa = await call('mpesa', () => intasend.payouts().mpesa({
    currency: 'KES',
    requires_approval: 'YES',
    batch_reference: 'sdk-salaries',
    transactions: [
      { name: 'Jane Doe', account: '254708374149', amount: '100', narrative: 'Salary' },
      { name: 'No Such', account: '254712340011', amount: 250, narrative: 'Salary' },
      { name: 'Late Larry', account: '254712340014', amount: '1500', narrative: 'Salary' },
      { name: 'Big Pay', account: '254711223344', amount: 20000, narrative: 'Salary' },
    ],
  }));
  const mpesaOK = mpesa && mpesa.tracking_id;
  // The SDK example posts the initiation response back as it is (the SDK adds public_key).
  await call('approve', mpesaOK ? () => intasend.payouts().approve(mpesa) : skip('no mpesa file'));
  await call('approveAgain', mpesaOK ? () => intasend.payouts().approve(mpesa) : skip('no mpesa file'));
  await call('mpesaStatus', poll('mpesaStatus', mpesa));

  const bank = await call('bank', () => intasend.payouts().bank({
    currency: 'KES',
    requires_approval: 'NO',
    transactions: [
      { name: 'Acme Supplies', account: '1234567890', bank_code: '11', amount: '2500.50', narrative: 'Invoice 42' },
    ],
  }));
  const b2b = await call('b2b', () => intasend.payouts().mpesaB2B({
    currency: 'KES',
    requires_approval: 'NO',
    transactions: [
      { name: 'KPLC', account: '888880', amount: '5000', account_type: 'PayBill', account_reference: 'ACC-778899' },
      { name: 'Corner Shop', account: '512345', amount: 30000, account_type: 'TillNumber' },
    ],
  }));
  // Verbatim from the SDK's README: account is a JSON number there.
  await call('b2bExample', () => intasend.payouts().mpesaB2B({
    currency: 'KES',
    requires_approval: 'YES',
    transactions: [{ name: 'ABC', account: 247247, amount: '100', account_type: 'PayBill', account_reference: '11111111' }],
  }));
  const p2p = await call('p2p', recipient ? () => intasend.payouts().intasend({
    currency: 'KES',
    requires_approval: 'NO',
    transactions: [{ account: recipient, amount: 750.25, narrative: 'sdk p2p' }],
  }) : skip('PAYSVC_RECIPIENT_WALLET not set'));
  const airtime = await call('airtime', () => intasend.payouts().airtime({
    currency: 'KES',
    requires_approval: 'NO',
    transactions: [{ name: 'Top up', account: '254722000111', amount: 50 }],
  }));

  await call('bankStatus', poll('bankStatus', bank));
  await call('b2bStatus', poll('b2bStatus', b2b));
  await call('p2pStatus', poll('p2pStatus', p2p));
  await call('airtimeStatus', poll('airtimeStatus', airtime));

  const summary = {};
  for (const name of ['mpesaStatus', 'bankStatus', 'b2bStatus', 'p2pStatus', 'airtimeStatus']) {
    const f = results[name];
    if (!f || f.error) {
      summary[name] = { error: f ? f.error : 'missing' };
      continue;
    }
    summary[name] = {
      provider: f.provider,
      status: f.status,
      status_code: f.status_code,
      paid_amount: f.paid_amount,
      failed_amount: f.failed_amount,
      actual_charges: f.actual_charges,
      polls: polls[name],
      transactions: (f.transactions || []).map((t) => ({ account: t.account, status: t.status, status_code: t.status_code })),
    };
  }
  results.summary = summary;
  finish(0);
})();
