'use strict';
// Drives intasend-node@1.1.2's refunds() calls against a local paysvc:
//
//   PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \
//   PAYSVC_INVOICE=<a COMPLETE invoice id> node -r ./redirect.js refunds.js
//
// Calls, in order: create (amount a JSON number, as the SDK example passes it), get
// (GET /api/v1/chargebacks/{id}/), list (GET /api/v1/chargebacks/), createTooMuch
// (more than the invoice has left: must reject with 400 and a JSON body),
// createBadReason (the SDK example's own reason 'UNAVAIBLE', not in the spec's enum:
// 400). Output and exit codes: see harness.js.

const IntaSend = require('intasend-node');
const { harness } = require('./harness');

const intasend = new IntaSend(process.env.PAYSVC_PUBLIC_KEY, process.env.PAYSVC_SECRET_KEY, true);
const invoice = process.env.PAYSVC_INVOICE;
const { call, finish, skip } = harness();

(async () => {
  const created = await call('create', () => intasend.refunds().create({
    invoice, amount: 200, reason: 'Unavailable service', reason_details: 'Service unavailable',
  }));
  const id = created && created.id;
  await call('get', id ? () => intasend.refunds().get(id) : skip('create returned no id'));
  await call('list', () => intasend.refunds().list());
  await call('createTooMuch', () => intasend.refunds().create({
    invoice, amount: 100000, reason: 'Other', reason_details: 'too much',
  }));
  await call('createBadReason', () => intasend.refunds().create({
    invoice, amount: 1, reason: 'UNAVAIBLE', reason_details: 'Service unavailable',
  }));
  finish(0);
})();
