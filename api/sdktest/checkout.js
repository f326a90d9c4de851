'use strict';
// Drives intasend-node@1.1.2's wallets().fundCheckout against a local paysvc:
//
//   PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... PAYSVC_WALLET=<KES WORKING wallet> \
//   PAYSVC_PHONE=2547XXXXXXXX node -r ./redirect.js checkout.js
//
// Calls, in order:
//   fundCheckout  wallets().fundCheckout({amount, currency, email, wallet_id, mobile_tarrif: CUSTOMER-PAYS, ...})
//   payOnPage     what the hosted page's M-Pesa form posts (session signature, no key), with a
//                 payer's attempt to pick BUSINESS-PAYS and the settlement wallet (PAYSVC_OTHER_WALLET)
//   status        collection().status(invoice, checkout, signature), polled until final
// Output and exit codes: see harness.js.

const IntaSend = require('intasend-node');
const { harness } = require('./harness');

const intasend = new IntaSend(process.env.PAYSVC_PUBLIC_KEY, process.env.PAYSVC_SECRET_KEY, true);
const { call, finish } = harness({ timeoutMs: 30000 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

(async () => {
  const co = await call('fundCheckout', () => intasend.wallets().fundCheckout({
    amount: 1000, currency: 'KES', email: 'fund@example.com', api_ref: 'sdk-fund-1', first_name: 'Node', last_name: 'Payer',
    wallet_id: process.env.PAYSVC_WALLET, mobile_tarrif: 'CUSTOMER-PAYS',
  }));
  const paid = await call('payOnPage', async () => {
    const r = await fetch(`${process.env.PAYSVC_BASE_URL}/api/v1/payment/collection/`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ method: 'M-PESA', currency: 'KES', amount: co.amount, api_ref: 'sdk-fund-1',
        phone_number: process.env.PAYSVC_PHONE, checkout_id: co.id, signature: co.signature,
        mobile_tarrif: 'BUSINESS-PAYS', wallet_id: process.env.PAYSVC_OTHER_WALLET }),
    });
    const j = await r.json();
    if (!r.ok) throw new Error(JSON.stringify(j));
    return j;
  });
  await call('status', async () => {
    for (let i = 0; i < 200; i++) {
      const s = await intasend.collection().status(paid.invoice.id, co.id, co.signature);
      if (s.invoice.state === 'COMPLETE' || s.invoice.state === 'FAILED') return s;
      await sleep(50);
    }
    throw new Error('invoice never reached a final state');
  });
  finish(0);
})();
