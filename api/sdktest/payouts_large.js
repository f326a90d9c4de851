'use strict';
// The largest payment file the service accepts, initiated and approved through
// intasend-node@1.1.2 as its README does: payouts().approve(<the whole initiation
// response>), which posts back every transaction (tens of megabytes at most).
//
//   PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \
//   PAYSVC_TRANSACTIONS=10000 node -r ./redirect.js payouts_large.js
//
// Prints {large, approve}: for each, the file's status, status_code,
// transactions_count, tracking_id and total_amount_estimate, and how many bytes the
// response was (never the file itself). Output and exit codes: see harness.js.

const IntaSend = require('intasend-node');
const { harness } = require('./harness');

const intasend = new IntaSend(process.env.PAYSVC_PUBLIC_KEY, process.env.PAYSVC_SECRET_KEY, true);
const n = Number(process.env.PAYSVC_TRANSACTIONS || '10000');
const { call, finish, skip } = harness({ timeoutMs: 50000 });

const summary = (f) => ({
  status: f.status,
  status_code: f.status_code,
  transactions_count: f.transactions_count,
  transactions: (f.transactions || []).length,
  tracking_id: f.tracking_id,
  total_amount_estimate: f.total_amount_estimate,
  bytes: Buffer.byteLength(JSON.stringify(f)),
});

(async () => {
  const transactions = [];
  for (let i = 0; i < n; i++) {
    transactions.push({
      name: `Employee ${i} ${'x'.repeat(80)}`,
      account: `2547${String(i).padStart(8, '0')}`,
      amount: '10',
      narrative: `Salary ${'n'.repeat(90)}`,
      id_number: String(10000000 + i),
    });
  }
  let file = null;
  await call('large', async () => {
    file = await intasend.payouts().mpesa({ currency: 'KES', requires_approval: 'YES', batch_reference: 'payroll', transactions });
    return summary(file);
  });
  await call('approve', file ? async () => summary(await intasend.payouts().approve(file)) : skip('no file'));
  finish(0);
})();
