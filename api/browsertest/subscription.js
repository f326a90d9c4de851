// Drives Debian's chromium (playwright-core) through the subscription pages as a
// customer would: a plan's subscribe page, then the setup page where the card is
// saved (with the issuer's challenge step when the card asks for one). Prints one
// JSON object: per scenario what the customer saw, what the pages requested and
// any console error. Go (api/subpages_browser_test.go) starts paysvc, makes the
// plans and subscriptions, and judges the outcome through the API.
//
// PAYSVC_SCENARIOS is a JSON list of {name, path, card, challenge, keyboard,
// subscriber, redirect} (the rest of the environment: harness.js).
'use strict';

const { TIMEOUT, base, shot, visibleText, focused, tabTo, eachScenario, outcome, followRedirect, tryAgain, main } = require('./harness');

// fill types into a field: with Tab and the keys alone, or as a pointer user does.
async function fill(page, s, id, label, value) {
  if (s.keyboard) {
    await tabTo(page, id, 25);
    await page.keyboard.type(value);
  } else {
    await page.getByLabel(label, { exact: true }).fill(value);
  }
}

async function submit(page, s, button) {
  if (s.keyboard) await page.keyboard.press('Enter');
  else await page.getByRole('button', { name: button }).click();
}

// subscribe fills the plan's subscribe page and follows it to the setup page.
async function subscribe(page, s, out) {
  out.planHeading = (await page.locator('#pay-title').innerText()).trim();
  out.planTerms = await visibleText(page, 'pay');
  const who = s.subscriber;
  await fill(page, s, 'email', 'Email', who.email);
  await fill(page, s, 'first-name', 'First name', who.first_name);
  await fill(page, s, 'last-name', 'Last name', who.last_name);
  if (who.country) await fill(page, s, 'country', 'Country code (optional)', who.country);
  if (who.zipcode) await fill(page, s, 'zipcode', 'Postal code', who.zipcode);
  await shot(page, `${s.name}-0-subscribe`);
  await submit(page, s, 'Continue to card details');
  await page.waitForURL((u) => u.pathname.startsWith('/subscriptions/setup/'), { timeout: TIMEOUT });
  await page.locator('#setup-form').waitFor({ state: 'visible' });
  out.setupPath = new URL(page.url()).pathname;
}

// setup saves the card on the setup page, answering the challenge step if asked.
async function setup(page, s, out) {
  out.headingShown = (await page.locator('#pay-title').innerText()).trim();
  out.termsShown = (await page.locator('.terms').innerText()).replace(/\s+/g, ' ').trim();
  await fill(page, s, 'card-number', 'Card number', s.card);
  await fill(page, s, 'expiry', 'Expiry (MM/YY)', '12/39');
  await fill(page, s, 'cvv', 'Security code (CVV)', '123');
  await shot(page, `${s.name}-1-card`);
  await submit(page, s, 'Save card and subscribe');
  if (s.challenge) {
    await page.locator('#challenge').waitFor({ state: 'visible', timeout: TIMEOUT });
    out.challengeFocused = await focused(page);
    out.challengeStatus = (await page.locator('#status').textContent()).trim();
    out.challengeHint = (await page.locator('#challenge-hint').innerText()).trim();
    await shot(page, `${s.name}-2-challenge`);
    // The focus is in the code field already: type and press Enter.
    await page.keyboard.type(s.challenge);
    await page.keyboard.press('Enter');
  }
  await page.locator('#done:visible, #failed:visible').first().waitFor({ timeout: TIMEOUT });
}

// pages opens the scenario's page, subscribes if it is the plan's, saves the card
// and goes on as the outcome asks: to the merchant's redirect or back to the form.
async function pages(page, s, out) {
  let left = false;
  // The setup endpoint answers a declined card or a challenge with 402, which
  // chromium logs as a failed resource: those are kept apart (Go checks they are
  // exactly the expected answers); anything else logged is a page error.
  page.on('console', (m) => {
    if (left || (m.type() !== 'error' && m.type() !== 'warning')) return;
    const refused = /^Failed to load resource: the server responded with a status of (4[0-9][0-9])/.exec(m.text());
    if (refused) out.refusals.push(Number(refused[1]));
    else out.console.push(m.text());
  });
  page.on('pageerror', (e) => { if (!left) out.console.push('pageerror: ' + e.message); });
  await page.goto(base + s.path, { waitUntil: 'load' });
  out.lang = await page.getAttribute('html', 'lang');
  out.merchantShown = (await page.locator('.merchant').innerText()).trim();
  if (s.subscriber) await subscribe(page, s, out);
  await setup(page, s, out);
  await outcome(page, s, out);
  if (out.final === 'done' && s.redirect) {
    left = true;
    await followRedirect(page, out, '/subscriptions/');
  }
  if (out.final === 'failed') await tryAgain(page, out);
}

main((browser) => eachScenario(browser,
  () => ({ requests: [], console: [], refusals: [], final: null, finalText: '', error: null }), pages));
