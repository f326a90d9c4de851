'use strict';
// Drives intasend-node@1.1.2's error paths against a local paysvc: every refusal
// must reach the caller as a rejection carrying a small JSON body (an empty error
// body would leave the SDK's promise pending forever).
//
//   PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \
//   PAYSVC_SOURCE_WALLET=<funded wallet> PAYSVC_DEST_WALLET=<wallet, same currency> \
//   PAYSVC_AMOUNT=<more than the source holds> [PAYSVC_BAD_SECRET=ISSecretKey_test_...] \
//   node -r ./redirect.js errors.js
//
// Calls, in order, all through one keep-alive agent:
//   overdraw            intraTransfer(source, dest, PAYSVC_AMOUNT)   -> 400 insufficient funds
//   wrongSecretList     list() with PAYSVC_BAD_SECRET (GET)         -> 401 "Invalid api token"
//   wrongSecretCreate   create() with PAYSVC_BAD_SECRET (POST)      -> 401 "Invalid api token"
//   unknownWallet       get('NOSUCHWALLET')                         -> 404
//   afterErrors         get(source): the connection state survived the errors
// Output and exit codes: see harness.js.

const crypto = require('crypto');
const IntaSend = require('intasend-node');
const { harness } = require('./harness');

const pub = process.env.PAYSVC_PUBLIC_KEY;
const secret = process.env.PAYSVC_SECRET_KEY;
const source = process.env.PAYSVC_SOURCE_WALLET;
const dest = process.env.PAYSVC_DEST_WALLET;
const amount = Number(process.env.PAYSVC_AMOUNT);
const badSecret = process.env.PAYSVC_BAD_SECRET
  || `ISSecretKey_test_${crypto.randomBytes(16).toString('hex')}`;

const intasend = new IntaSend(pub, secret, true);
const wrong = new IntaSend(pub, badSecret, true);
const { call, finish, skip } = harness();

(async () => {
  const ready = source && dest && Number.isFinite(amount);
  const missing = skip('PAYSVC_SOURCE_WALLET, PAYSVC_DEST_WALLET and PAYSVC_AMOUNT are required');
  await call('overdraw', ready
    ? () => intasend.wallets().intraTransfer(source, dest, amount, 'sdk overdraw') : missing);
  await call('wrongSecretList', () => wrong.wallets().list());
  await call('wrongSecretCreate', () => wrong.wallets().create({
    label: 'SDK-WRONG-SECRET', wallet_type: 'WORKING', currency: 'KES', can_disburse: false,
  }));
  await call('unknownWallet', () => intasend.wallets().get('NOSUCHWALLET'));
  await call('afterErrors', source ? () => intasend.wallets().get(source) : missing);
  finish(0);
})();
