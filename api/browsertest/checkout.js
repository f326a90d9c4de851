// Drives Debian's chromium (playwright-core, no bundled browser) through the hosted
// checkout page as a customer would, and prints one JSON object: per scenario what
// the customer saw, what the page requested and any console error. Go
// (api/browser_test.go) starts paysvc, makes the sessions, and judges the results
// through the API. One browser for all scenarios keeps the test quick.
//
// Env: PAYSVC_BASE_URL, PAYSVC_SCENARIOS (JSON list of {name, kind, checkout, phone,
// amount}), PAYSVC_SCREENSHOTS (a directory), CHROMIUM (default /usr/bin/chromium).
'use strict';

const { chromium } = require('playwright-core');

const base = process.env.PAYSVC_BASE_URL;
const scenarios = JSON.parse(process.env.PAYSVC_SCENARIOS);
const shots = process.env.PAYSVC_SCREENSHOTS;
const TIMEOUT = 15000;

async function shot(page, name) {
  await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

// visibleText is the text of the view a customer sees now.
async function visibleText(page, id) {
  return (await page.locator('#' + id).innerText()).replace(/\s+/g, ' ').trim();
}

// tabTo presses Tab until the element with that id has focus (keyboard only).
async function tabTo(page, id) {
  for (let i = 0; i < 20; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(() => document.activeElement && document.activeElement.id) === id) return;
  }
  throw new Error(`Tab never reached #${id}`);
}

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
    await tabTo(page, 'amount');
    await page.keyboard.type(s.amount);
    await tabTo(page, 'phone');
    await page.keyboard.type(s.phone);
    await shot(page, `${s.name}-1-form`);
    await page.keyboard.press('Enter');
    await page.locator('#wait').waitFor({ state: 'visible', timeout: TIMEOUT });
    out.seen.push(await visibleText(page, 'wait'));
    await page.locator('#done:visible, #failed:visible').first().waitFor({ timeout: TIMEOUT });
  },
};

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox'],
  });
  const results = {};
  try {
    for (const s of scenarios) {
      const out = { seen: [], requests: [], console: [], invoice: null, final: null, finalText: '', error: null };
      results[s.name] = out;
      // A phone-sized window: the pages are mobile first.
      const context = await browser.newContext({ viewport: { width: 400, height: 780 }, locale: 'en-KE' });
      const page = await context.newPage();
      page.setDefaultTimeout(TIMEOUT);
      page.on('request', (r) => out.requests.push(r.url()));
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
      try {
        await page.goto(`${base}/checkout/${s.checkout}/`, { waitUntil: 'load' });
        out.lang = await page.getAttribute('html', 'lang');
        out.merchantShown = (await page.locator('.merchant').innerText()).trim();
        out.headingShown = (await page.locator('#pay-title').innerText()).trim();
        await run[s.kind](page, s, out);
        out.final = await page.locator('#done').isVisible() ? 'done' : 'failed';
        out.finalText = await visibleText(page, out.final);
        out.focused = await page.evaluate(() => document.activeElement && document.activeElement.id);
        out.status = (await page.locator('#status').textContent()).trim();
        await shot(page, `${s.name}-9-${out.final}`);
        if (out.final === 'done' && s.redirect) {
          // The merchant's redirect_url, with the session and invoice appended.
          left = true;
          await page.locator('#continue').click();
          await page.waitForURL((u) => !u.pathname.startsWith('/checkout/'), { timeout: TIMEOUT });
          out.redirectedTo = page.url();
        }
        if (out.final === 'failed' && s.retry) {
          await page.getByRole('button', { name: 'Try again' }).click();
          await page.locator('#pay').waitFor({ state: 'visible' });
          out.retryFocused = await page.evaluate(() => document.activeElement && document.activeElement.id);
        }
      } catch (e) {
        out.error = String(e && e.message || e);
        await shot(page, `${s.name}-error`).catch(() => {});
      }
      await context.close();
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(results));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
