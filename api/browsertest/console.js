// Drives Debian's chromium (playwright-core) through the merchant console as a
// merchant would: sign in with the secret key, make a restricted key, approve a
// payment file, replay a webhook event, refund a collection, cancel a
// subscription, sign in with the restricted key, sign out and try the old cookie.
// axe-core checks every page it opens. Prints one JSON object of what was seen;
// Go (api/console_browser_test.go) prepares the data and judges the outcome through
// the API.
//
// PAYSVC_SCENARIOS is one JSON object: key, file, event, phone, subscription,
// merchant (the rest of the environment: harness.js).
'use strict';

const harness = require('./harness');

const { TIMEOUT, base, axeViolations, main } = harness;
const s = harness.scenarios;

const out = { steps: [], axe: {}, console: [], requests: [], error: null };

function shot(page, name) {
  return harness.shot(page, `console-${name}`);
}

function text(page, sel) {
  return page.locator(sel).first().innerText().then((t) => t.replace(/\s+/g, ' ').trim());
}

// audit keeps axe-core's violations of the page as it is.
async function audit(page, name) {
  out.axe[name] = await axeViolations(page);
}

function watch(page) {
  page.setDefaultTimeout(TIMEOUT);
  page.on('request', (r) => out.requests.push(r.url()));
  page.on('console', (m) => {
    if (m.type() !== 'error' && m.type() !== 'warning') return;
    // The refusals the test provokes on purpose (403 pages) are logged as failed
    // resources; they are judged by status, not here.
    if (/^Failed to load resource: the server responded with a status of 40[34]/.test(m.text())) return;
    out.console.push(m.text());
  });
  page.on('pageerror', (e) => out.console.push('pageerror: ' + e.message));
}

async function signIn(page, key) {
  await page.goto(base + '/console/');
  await page.waitForURL((u) => u.pathname === '/console/sign-in');
  await page.getByLabel('Secret key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => u.pathname === '/console');
}

async function visit(page, path, name) {
  const resp = await page.goto(base + path);
  await audit(page, name);
  return resp.status();
}

main(async (browser) => {
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-KE' });
    const page = await context.newPage();
    watch(page);

    // Sign in.
    await page.goto(base + '/console/');
    await page.waitForURL((u) => u.pathname === '/console/sign-in');
    await audit(page, 'sign-in');
    await shot(page, 'sign-in');
    await signIn(page, s.key);
    out.merchantShown = await text(page, '#merchant-name');
    await audit(page, 'overview');
    await shot(page, 'overview');
    out.steps.push('signed in');

    // Every section, for axe.
    for (const [path, name] of [['/console/wallets', 'wallets'], ['/console/wallets/' + s.wallet, 'wallet'],
      ['/console/collections', 'collections'], ['/console/payment-files', 'payment-files'], ['/console/refunds', 'refunds'],
      ['/console/subscriptions', 'subscriptions'], ['/console/payment-links', 'payment-links'], ['/console/webhooks', 'webhooks'],
      ['/console/mailbox', 'mailbox'], ['/console/test-clocks', 'test-clocks']]) {
      const status = await visit(page, path, name);
      if (status !== 200) throw new Error(`${path}: ${status}`);
      if (name === 'webhooks') await shot(page, name);
    }

    // A restricted key, its secret shown once.
    await visit(page, '/console/keys', 'keys');
    for (const p of s.grant) await page.check('#perm-' + p);
    await page.getByLabel('Your secret key, to confirm').fill(s.key);
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.locator('#new-secret').waitFor();
    out.newSecret = await text(page, '#new-secret');
    await audit(page, 'keys-created');
    await shot(page, 'keys');
    await page.goto(base + '/console/keys');
    out.secretShownAgain = (await page.content()).includes(out.newSecret);
    out.steps.push('key created');

    // Approve a payment file: totals and charges first, then the file completes.
    await visit(page, '/console/payment-files/' + s.file, 'payment-file');
    out.fileTotal = await text(page, '#file-total');
    out.fileCharges = await text(page, '#file-charges');
    out.fileBefore = await text(page, '#file-status');
    await shot(page, 'payment-file');
    await page.locator('#approve').click();
    await page.locator('#notice').waitFor();
    out.fileNotice = await text(page, '#notice');
    for (let i = 0; i < 60; i++) {
      out.fileAfter = await text(page, '#file-status');
      if (out.fileAfter === 'COMPLETE' || out.fileAfter === 'FAILED') break;
      await page.waitForTimeout(250);
      await page.reload();
    }
    await shot(page, 'payment-file-complete');
    out.steps.push('file approved');

    // Replay a webhook event and see the new attempt.
    await visit(page, '/console/webhooks/events/' + s.event, 'webhook-event');
    out.attemptsBefore = await page.locator('#attempts tbody tr').count();
    await page.locator('#replay').click();
    await page.locator('#notice').waitFor();
    out.attemptsAfter = await page.locator('#attempts tbody tr').count();
    out.newestAttempt = await text(page, '#attempts tbody tr');
    // The signature headers the replay sent, as the page shows them.
    const header = async (cls, name) => (await text(page, `#attempts tbody tr .${cls}`)).replace(name + ': ', '');
    out.newestSigned = {
      id: await header('signed-id', 'webhook-id'),
      timestamp: await header('signed-timestamp', 'webhook-timestamp'),
      signature: await header('signed-signature', 'webhook-signature'),
    };
    await shot(page, 'webhook-replay');
    out.steps.push('event replayed');

    // Rotate the webhook's signing secret: the new one shown once.
    await page.goto(base + '/console/webhooks');
    await page.getByRole('button', { name: /^Rotate secret of / }).first().click();
    await page.locator('#signing-secret').waitFor();
    out.rotatedSecret = await text(page, '#signing-secret');
    await audit(page, 'rotated-secret');
    out.steps.push('secret rotated');

    // A payment link: created, its QR code shown, deactivated.
    await page.goto(base + '/console/payment-links');
    await page.getByLabel('Title').fill('Market stall');
    await page.getByLabel('Amount (whole units; empty: the customer enters it)').fill('500');
    await page.getByRole('button', { name: 'Create link' }).click();
    await page.locator('#notice').waitFor();
    out.linkNotice = await text(page, '#notice');
    const qr = page.getByAltText('QR code of Market stall');
    await qr.waitFor();
    // Visible is not loaded: wait for the image itself (0 if it fails to load).
    out.linkQRWidth = await qr.evaluate((img) => new Promise((resolve) => {
      if (img.complete) return resolve(img.naturalWidth);
      img.addEventListener('load', () => resolve(img.naturalWidth), { once: true });
      img.addEventListener('error', () => resolve(0), { once: true });
    }));
    await audit(page, 'payment-links-created');
    await shot(page, 'payment-links');
    await page.getByRole('button', { name: 'Deactivate Market stall' }).click();
    await page.locator('#notice').waitFor();
    out.linkAfter = await text(page, 'li:has-text("Market stall")');
    out.steps.push('link created and deactivated');

    // A sandbox test clock: created, advanced.
    await page.goto(base + '/console/test-clocks');
    await page.getByLabel('Name').fill('Billing rehearsal');
    await page.getByLabel('Frozen at (Nairobi time)').fill('2026-01-01T09:00');
    await page.getByRole('button', { name: 'Create clock' }).click();
    await page.locator('#frozen-time').waitFor();
    out.clockCreated = await text(page, '#frozen-time');
    await audit(page, 'test-clock');
    await page.getByLabel('Advance to').fill('2026-02-01T09:00');
    await page.getByRole('button', { name: 'Advance' }).click();
    await page.locator('#notice').waitFor();
    out.clockAdvanced = await text(page, '#frozen-time');
    out.clockID = new URL(page.url()).searchParams.get('clock');
    out.steps.push('clock advanced');

    // Refund a collection found by the payer's phone.
    await page.goto(base + '/console/collections');
    await page.getByLabel('Search by reference, phone, email or invoice id').fill(s.phone);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL((u) => u.searchParams.get('q') === s.phone);
    await audit(page, 'collections-search');
    await shot(page, 'collections');
    await page.getByRole('link', { name: 'Refund', exact: true }).first().click();
    await page.waitForURL((u) => u.pathname === '/console/refunds/new');
    await audit(page, 'refund-new');
    out.refundInvoice = await page.getByLabel('Invoice id').inputValue();
    await page.getByLabel('Amount to refund').fill(s.refund);
    await page.getByLabel('Reason').selectOption('Duplicate payment');
    await page.getByRole('button', { name: 'Request refund' }).click();
    await page.waitForURL((u) => u.pathname === '/console/refunds');
    out.refundNotice = await text(page, '#notice');
    out.refundsShown = await text(page, 'main table');
    await shot(page, 'refunds');
    out.steps.push('refunded');

    // Cancel a subscription.
    await page.goto(base + '/console/subscriptions');
    await page.getByRole('button', { name: 'Cancel subscription ' + s.subscription }).click();
    await page.locator('#notice').waitFor();
    out.subscriptionNotice = await text(page, '#notice');
    out.subscriptionRow = await text(page, `tr:has-text("${s.subscription}")`);
    await audit(page, 'subscriptions-after');
    await shot(page, 'subscriptions');
    out.steps.push('subscription cancelled');

    // The restricted key's own session: only what it may use.
    const rctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-KE' });
    const rpage = await rctx.newPage();
    watch(rpage);
    await signIn(rpage, out.newSecret);
    out.restrictedNav = await rpage.locator('nav a').allInnerTexts();
    out.restrictedFileApprove = await (async () => {
      await rpage.goto(base + '/console/payment-files/' + s.file);
      return rpage.locator('#approve').count();
    })();
    out.restrictedKeys = await rpage.goto(base + '/console/keys').then((r) => r.status());
    out.restrictedKeysText = await text(rpage, '#problem');
    await audit(rpage, 'refused');
    await shot(rpage, 'restricted');
    out.restrictedWebhooks = await rpage.goto(base + '/console/webhooks').then((r) => r.status());
    out.restrictedRefunds = await rpage.goto(base + '/console/refunds').then((r) => r.status());
    await rctx.close();
    out.steps.push('restricted key checked');

    // On a phone.
    const pctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'en-KE', isMobile: true, hasTouch: true });
    const ppage = await pctx.newPage();
    watch(ppage);
    await signIn(ppage, s.key);
    await audit(ppage, 'overview-phone');
    out.phoneOverflow = await ppage.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
    await shot(ppage, 'phone');
    await pctx.close();

    // Sign out; the old cookie, put back, opens nothing.
    const before = await context.cookies();
    await page.goto(base + '/console');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL((u) => u.pathname === '/console/sign-in');
    out.signOutNotice = await text(page, '.notice');
    out.cookieAfterSignOut = (await context.cookies()).some((c) => c.name === 'console_session');
    await context.addCookies(before);
    await page.goto(base + '/console/wallets');
    out.oldCookieLandsOn = new URL(page.url()).pathname;
    out.steps.push('signed out');
    await context.close();
  } catch (e) {
    out.error = String(e && e.stack || e);
    for (const ctx of browser.contexts()) {
      for (const p of ctx.pages()) {
        out.lastPages = (out.lastPages || []).concat([p.url() + ': ' + (await p.locator('body').innerText().catch(() => '')).slice(0, 800)]);
      }
    }
  }
  return out;
}, 2);
