// What every browser script here shares: its environment (the paysvc under test,
// the scenarios Go passes, where screenshots go), one launch of Debian's chromium,
// the lookups a customer's eye and keyboard make, and the run of a script that
// prints one JSON object for Go to judge.
//
// Env: PAYSVC_BASE_URL, PAYSVC_SCENARIOS (JSON: each script says its shape),
// PAYSVC_SCREENSHOTS (a directory), CHROMIUM (default /usr/bin/chromium).
'use strict';

const fs = require('fs');
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

function focused(page) {
  return page.evaluate(() => document.activeElement && document.activeElement.id);
}

// tabTo presses Tab, at most tries times, until the element with that id has
// focus (keyboard only).
async function tabTo(page, id, tries) {
  for (let i = 0; i < tries; i++) {
    await page.keyboard.press('Tab');
    if (await focused(page) === id) return;
  }
  throw new Error(`Tab never reached #${id}`);
}

let axeSource;

// axeViolations runs axe-core on the page as it is (injected through the
// DevTools protocol, which the page's CSP does not govern) and returns its
// violations, each with at most five of the nodes it names.
async function axeViolations(page) {
  axeSource = axeSource || fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(axeSource);
  return page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }));
  });
}

// eachScenario drives every scenario in a fresh phone-sized window (the pages are
// mobile first) whose requests out.requests records, and returns the outs by
// scenario name. A scenario that throws keeps its error and a screenshot.
async function eachScenario(browser, newOut, drive) {
  const results = {};
  for (const s of scenarios) {
    const out = newOut();
    results[s.name] = out;
    const context = await browser.newContext({ viewport: { width: 400, height: 780 }, locale: 'en-KE' });
    const page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    page.on('request', (r) => out.requests.push(r.url()));
    try {
      await drive(page, s, out);
    } catch (e) {
      out.error = String(e && e.message || e);
      await shot(page, `${s.name}-error`).catch(() => {});
    }
    await context.close();
  }
  return results;
}

// outcome records the view a payment page ended on (done or failed), what it says,
// where the focus is and what the status line announced, with a screenshot.
async function outcome(page, s, out) {
  out.final = await page.locator('#done').isVisible() ? 'done' : 'failed';
  out.finalText = await visibleText(page, out.final);
  out.focused = await focused(page);
  out.status = (await page.locator('#status').textContent()).trim();
  await shot(page, `${s.name}-9-${out.final}`);
}

// followRedirect continues to the merchant's redirect_url (with the session and
// invoice appended): the first address not under ours.
async function followRedirect(page, out, ours) {
  await page.locator('#continue').click();
  await page.waitForURL((u) => !u.pathname.startsWith(ours), { timeout: TIMEOUT });
  out.redirectedTo = page.url();
}

// tryAgain leaves a failed view for the form again and records where the focus went.
async function tryAgain(page, out) {
  await page.getByRole('button', { name: 'Try again' }).click();
  await page.locator('#pay').waitFor({ state: 'visible' });
  out.retryFocused = await focused(page);
}

// main launches chromium, runs body with it and prints what body returns as JSON
// (indented by indent spaces, if any); a failure outside body's own handling
// exits non-zero.
function main(body, indent) {
  (async () => {
    const browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox'],
    });
    let out;
    try {
      out = await body(browser);
    } finally {
      await browser.close();
    }
    process.stdout.write(JSON.stringify(out, null, indent));
  })().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}

module.exports = {
  base, scenarios, shots, TIMEOUT,
  shot, visibleText, focused, tabTo, axeViolations,
  eachScenario, outcome, followRedirect, tryAgain, main,
};
