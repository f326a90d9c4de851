'use strict';
// Drives intasend-node@1.1.2's collection calls against a local paysvc:
//
//   PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \
//   PAYSVC_PHONE=2547XXXXXXXX PAYSVC_AMOUNT=100 node -r ./redirect.js collection.js
//
// Calls, in order:
//   stkPush     collection().mpesaStkPush({phone_number, amount, api_ref})  (Bearer + public key)
//   status      collection().status(invoice_id)  (the SDK drops the Bearer here: public key only)
//   statusLater the same object, polled until the invoice is final (up to ~10 s)
//   stkPushPub  the same object again: its STK push carries the public key alone
//   charge      a fresh collection().charge({amount, currency, email, api_ref}): a checkout session
//   statusSig   status(invoice, checkout, signature) with the checkout's signature (no key needed)
// Output and exit codes: see harness.js.

const IntaSend = require('intasend-node');
const { harness } = require('./harness');

const intasend = new IntaSend(process.env.PAYSVC_PUBLIC_KEY, process.env.PAYSVC_SECRET_KEY, true);
const { call, finish } = harness({ timeoutMs: 30000 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

(async () => {
  const collection = intasend.collection();
  const push = await call('stkPush', () => collection.mpesaStkPush({
    phone_number: process.env.PAYSVC_PHONE, amount: Number(process.env.PAYSVC_AMOUNT), api_ref: 'sdk-order-1',
  }));
  const id = push && push.invoice && push.invoice.invoice_id;
  await call('status', () => collection.status(id));
  await call('statusLater', async () => {
    for (let i = 0; i < 100; i++) {
      const s = await collection.status(id);
      if (s.invoice.state === 'COMPLETE' || s.invoice.state === 'FAILED') return s;
      await sleep(100);
    }
    throw new Error('invoice never reached a final state');
  });
  await call('stkPushPub', () => collection.mpesaStkPush({
    phone_number: process.env.PAYSVC_PHONE, amount: 10, api_ref: 'sdk-order-2',
  }));
  const charge = await call('charge', () => intasend.collection().charge({
    amount: 150, currency: 'KES', email: 'sdk@example.com', api_ref: 'sdk-checkout-1',
  }));
  await call('statusSig', async () => {
    // Pay the session as its hosted page does, then ask with the SDK's signature form.
    const r = await fetch(`${process.env.PAYSVC_BASE_URL}/api/v1/payment/collection/`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ method: 'M-PESA', currency: 'KES', amount: '150', api_ref: 'sdk-checkout-1',
        phone_number: process.env.PAYSVC_PHONE, checkout_id: charge.id, signature: charge.signature }),
    });
    const paid = await r.json();
    if (!r.ok) throw new Error(JSON.stringify(paid));
    return intasend.collection().status(paid.invoice.id, charge.id, charge.signature);
  });
  finish(0);
})();
