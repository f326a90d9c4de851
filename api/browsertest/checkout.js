// Drives Debian's chromium (playwright-core, no bundled browser) through the hosted
// checkout page as a customer would, and prints one JSON object: per scenario what
// the customer saw, what the page requested and any console error. Go
// (api/browser_test.go) starts paysvc, makes the sessions, and judges the results
// through the API. One browser for all scenarios keeps the test quick.
//
// PAYSVC_SCENARIOS is a JSON list of {name, kind, checkout, phone, amount} (the
// rest of the environment: harness.js).
'use strict';

const { TIMEOUT, base, shot, visibleText, tabTo, eachScenario, outcome, followRedirect, tryAgain, main } = require('./harness');

const run = {
  // Pays by M-Pesa STK with the mouse-free basics a customer uses: fill, click.
  async stk(page, s, out) {
    await page.locator('#phone').fill(s.phone);
    await shot(page, `${s.name}-1-form`);
    await page.getByRole('button', { name: 'Pay with M-Pesa' }).click();
    await page.locator('#wait').waitFor({ state: 'visible', timeout: TIMEOUT });
    out.seen.push(await visibleText(page, 'wait'));
    await shot(page, `${s.name}-2-waiting`);
    if (s.expect === 'PROCESSING') {
      await page.locator('#wait-stage', { hasText: 'PIN received' }).waitFor({ timeout: TIMEOUT });
      out.seen.push(await visibleText(page, 'wait'));
      await shot(page, `${s.name}-3-processing`);
    }
    await page.locator('#done:visible, #failed:visible').first().waitFor({ timeout: TIMEOUT });
  },

  // Pays by card: the method switch shows the card fields in place of the phone.
  async card(page, s, out) {
    await page.getByLabel('Card', { exact: true }).check();
    out.phoneHidden = !(await page.locator('#phone').isVisible());
    await page.getByLabel('Card number').fill(s.card);
    await page.getByLabel('Expiry (MM/YY)').fill('12/39');
    await page.getByLabel('Security code (CVV)').fill('123');
    await shot(page, `${s.name}-1-form`);
    await page.getByRole('button', { name: 'Pay by card' }).click();
    await page.locator('#done:visible, #failed:visible').first().waitFor({ timeout: TIMEOUT });
  },

  // Fills and submits the form with the keyboard alone: Tab to each field, Enter.
  async keyboard(page, s, out) {
    await tabTo(page, 'amount', 20);
    await page.keyboard.type(s.amount);
    await tabTo(page, 'phone', 20);
    await page.keyboard.type(s.phone);
    await shot(page, `${s.name}-1-form`);
    await page.keyboard.press('Enter');
    await page.locator('#wait').waitFor({ state: 'visible', timeout: TIMEOUT });
    out.seen.push(await visibleText(page, 'wait'));
    await page.locator('#done:visible, #failed:visible').first().waitFor({ timeout: TIMEOUT });
  },
};

// pay opens the scenario's page and drives it to its outcome, then on as the
// scenario asks: to the merchant's redirect or back to the form.
async function pay(page, s, out) {
  // Once the customer follows the merchant's redirect_url the page is not ours:
  // what the merchant's page logs (a missing favicon) is not judged.
  let left = false;
  page.on('console', (m) => { if (!left && (m.type() === 'error' || m.type() === 'warning')) out.console.push(m.text()); });
  page.on('pageerror', (e) => { if (!left) out.console.push('pageerror: ' + e.message); });
  page.on('response', async (r) => {
    if (/\/api\/v1\/payment\/(collection|card)\/$/.test(new URL(r.url()).pathname) && r.ok()) {
      try { const j = await r.json(); out.invoice = j.invoice.invoice_id || j.invoice.id; } catch (e) { /* judged in Go */ }
    }
  });
  await page.goto(base + (s.path || `/checkout/${s.checkout}/`), { waitUntil: 'load' });
  out.lang = await page.getAttribute('html', 'lang');
  out.merchantShown = (await page.locator('.merchant').innerText()).trim();
  out.headingShown = (await page.locator('#pay-title').innerText()).trim();
  await run[s.kind](page, s, out);
  await outcome(page, s, out);
  if (out.final === 'done' && s.redirect) {
    left = true;
    await followRedirect(page, out, '/checkout/');
  }
  if (out.final === 'failed' && s.retry) await tryAgain(page, out);
}

main((browser) => eachScenario(browser,
  () => ({ seen: [], requests: [], console: [], invoice: null, final: null, finalText: '', error: null }), pay));
