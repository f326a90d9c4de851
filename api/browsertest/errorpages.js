// Drives Debian's chromium (playwright-core) to the customer's addresses that
// refuse (unknown, inactive, used up) as a customer's browser would: by opening
// them, and by a form posted from a page of the same origin. For each it prints
// what the customer saw: status, title, heading, document language, landmarks,
// whether the text is a raw JSON error, axe-core's violations and any console
// error. Go (api/custpages_browser_test.go) prepares the addresses and judges.
//
// PAYSVC_SCENARIOS is a JSON list of {name, path, post}: post is a form's fields,
// sent as a form the page submits (the rest of the environment: harness.js).
'use strict';

const { TIMEOUT, base, scenarios, shot, axeViolations, main } = require('./harness');

main(async (browser) => {
  const out = {};
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'en-KE' });
  for (const s of scenarios) {
    const r = { console: [], requests: [], error: null };
    out[s.name] = r;
    const page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    page.on('request', (q) => r.requests.push(q.url()));
    page.on('console', (m) => {
      if (m.type() !== 'error' && m.type() !== 'warning') return;
      // The refusal itself (the status the test expects) is logged as a failed
      // resource; it is judged by status, not here.
      if (/^Failed to load resource: the server responded with a status of (4\d\d|5\d\d)/.test(m.text())) return;
      r.console.push(m.text());
    });
    page.on('pageerror', (e) => r.console.push('pageerror: ' + e.message));
    try {
      let resp;
      if (s.post) {
        // A form on a page of paysvc's origin (the healthz answer), submitted as a
        // customer's click would: a top-level navigation with the browser's Accept.
        await page.goto(base + '/healthz');
        const nav = page.waitForNavigation();
        await page.evaluate(([action, fields]) => {
          const f = document.createElement('form');
          f.method = 'post';
          f.action = action;
          for (const [k, v] of Object.entries(fields)) {
            const i = document.createElement('input');
            i.type = 'hidden'; i.name = k; i.value = v;
            f.appendChild(i);
          }
          document.body.appendChild(f);
          f.submit();
        }, [base + s.path, s.post]);
        resp = await nav;
      } else {
        resp = await page.goto(base + s.path);
      }
      r.status = resp.status();
      r.contentType = resp.headers()['content-type'] || '';
      r.title = await page.title();
      r.lang = await page.evaluate(() => document.documentElement.lang);
      // Counted first: a page without a heading (a raw JSON error) must be
      // reported, not waited on.
      r.headings = await page.locator('h1').count();
      r.heading = r.headings ? (await page.locator('h1').first().innerText()).trim() : '';
      r.main = await page.getByRole('main').count();
      r.banner = await page.getByRole('banner').count();
      r.text = (await page.locator('body').innerText()).replace(/\s+/g, ' ').trim();
      r.rawJSON = (() => { try { JSON.parse(r.text); return true; } catch (e) { return /"request_id"|"detail"\s*:/.test(r.text); } })();
      r.axe = await axeViolations(page);
      await shot(page, `error-${s.name}`);
    } catch (e) {
      r.error = String(e && e.stack || e);
    }
    await page.close();
  }
  return out;
}, 2);
