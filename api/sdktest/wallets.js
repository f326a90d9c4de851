'use strict';
// Drives intasend-node@1.1.2's wallets() calls against a local paysvc.
//
//   PAYSVC_BASE_URL=http://127.0.0.1:18080 PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \
//   PAYSVC_SOURCE_WALLET=<wallet_id with funds> [PAYSVC_LABEL=...] [PAYSVC_AMOUNT=10] \
//   node -r ./redirect.js wallets.js
//
// Runs list, create, get, intraTransfer, transactions, get#2, get#3 in order and
// prints ONE JSON object keyed by call name (see harness.js for the error shape,
// the exit codes and the 20s pending guard).

const IntaSend = require('intasend-node');
const { harness } = require('./harness');

const pub = process.env.PAYSVC_PUBLIC_KEY;
const secret = process.env.PAYSVC_SECRET_KEY;
const label = process.env.PAYSVC_LABEL || 'SDK-WALLET-1';
const source = process.env.PAYSVC_SOURCE_WALLET;
const amount = Number(process.env.PAYSVC_AMOUNT || 10); // a JSON number, as integrators pass it

const intasend = new IntaSend(pub, secret, true);
const { call, finish, skip } = harness();

(async () => {
  await call('list', () => intasend.wallets().list());
  const created = await call('create', () => intasend.wallets().create({
    label, wallet_type: 'WORKING', currency: 'KES', can_disburse: true,
  }));
  const id = created && created.wallet_id;
  const noId = skip('create returned no wallet_id');

  await call('get', id ? () => intasend.wallets().get(id) : noId);
  // SDK signature: intraTransfer(sourceID, destinationID, amount, narrative)
  //   -> POST /api/v1/wallets/{sourceID}/intra_transfer/ {wallet_id: destinationID, amount, narrative}
  await call('intraTransfer', !source ? skip('PAYSVC_SOURCE_WALLET not set') : id
    ? () => intasend.wallets().intraTransfer(source, id, amount, 'sdk transfer') : noId);
  await call('transactions', id ? () => intasend.wallets().transactions(id) : noId);
  // Back-to-back GETs: each carries an unframed body (see SDK-NOTES.md).
  await call('get#2', id ? () => intasend.wallets().get(id) : noId);
  await call('get#3', id ? () => intasend.wallets().get(id) : noId);
  finish(0);
})();
