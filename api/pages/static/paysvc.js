// paysvc hosted pages: the one script of every page, served from /static/ (the pages'
// Content-Security-Policy allows no inline script). A page hands it its data through
// data- attributes on the payment form; the script only ever sets textContent (the
// CSP requires Trusted Types for DOM sinks) and talks to paysvc alone.
(function () {
  'use strict';

  var POLL_EVERY_MS = 1000;
  var POLL_FOR_MS = 3 * 60 * 1000; // M-Pesa gives up on a prompt well before this
  var REDIRECT_AFTER_S = 5;

  // API field (attr of a validation error) -> the input that shows it.
  var FIELD_INPUTS = { phone_number: 'phone', amount: 'amount', card_number: 'card-number', expiry: 'expiry', cvv: 'cvv',
    challenge_code: 'challenge', email: 'email', first_name: 'first-name', last_name: 'last-name', country: 'country',
    zipcode: 'zipcode' };

  function $(id) { return document.getElementById(id); }

  function newKey() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return ('0' + x.toString(16)).slice(-2); }).join('');
  }

  function announce(text) {
    var s = $('status');
    if (s) s.textContent = text;
  }

  // show makes one view of the page visible and moves focus to its heading, so a
  // keyboard or screen-reader user lands on what changed.
  function show(view) {
    ['pay', 'wait', 'done', 'failed', 'unavailable'].forEach(function (id) {
      var el = $(id);
      if (el) el.hidden = id !== view;
    });
    var h = $(view + '-title');
    if (h) h.focus();
  }

  function setFieldError(inputID, text) {
    var input = $(inputID), err = $(inputID + '-error');
    if (!input || !err) return false;
    err.textContent = text;
    err.hidden = !text;
    if (text) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
    return true;
  }

  function clearErrors() {
    Object.keys(FIELD_INPUTS).forEach(function (k) { setFieldError(FIELD_INPUTS[k], ''); });
    var fe = $('form-error');
    fe.textContent = '';
    fe.hidden = true;
  }

  function formError(text) {
    var fe = $('form-error');
    fe.textContent = text;
    fe.hidden = false;
  }

  // normalisePhone accepts how Kenyans write their number (0712 345 678, +254 712...)
  // and returns the API's 254XXXXXXXXX; a masked prefill (2547****5678) is sent as is.
  function normalisePhone(raw) {
    var p = raw.replace(/[\s-]/g, '');
    if (p.charAt(0) === '+') p = p.slice(1);
    if (/^0[17][0-9]{8}$/.test(p)) p = '254' + p.slice(1);
    if (/^[17][0-9]{8}$/.test(p)) p = '254' + p;
    return p;
  }

  // readCard checks the card fields as the service will, so the customer hears
  // about a typo at once, and copies them into body; bad(id, text) marks a field.
  function readCard(body, bad) {
    var n = $('card-number').value.replace(/[\s-]/g, '');
    if (!/^[0-9]{12,19}$/.test(n)) bad('card-number', 'Enter the card number as printed on the card.');
    var e = $('expiry').value.replace(/\s/g, '');
    if (/^[0-9]{4}$/.test(e)) e = e.slice(0, 2) + '/' + e.slice(2);
    if (!/^(0[1-9]|1[0-2])\/[0-9]{2}$/.test(e)) bad('expiry', 'Enter the expiry date as MM/YY, for example 08/29.');
    var c = $('cvv').value.trim();
    if (!/^[0-9]{3,4}$/.test(c)) bad('cvv', 'Enter the 3 or 4 digit code on the back of the card.');
    body.card_number = n; body.expiry = e; body.cvv = c;
  }

  // refusal shows the service's 4xx answer at the field it names (focused), or
  // under the form, and returns the text.
  function refusal(r, fallback) {
    var item = r.body.errors && r.body.errors[0];
    var text = (item && item.detail) || r.body.detail || fallback;
    var input = item && item.attr && FIELD_INPUTS[item.attr];
    if (!(input && setFieldError(input, text))) formError(text);
    if (input && $(input)) $(input).focus();
    announce(text);
    return text;
  }

  // flagged moves focus to first, the first field marked bad, and says so; false
  // when no field was marked.
  function flagged(first) {
    if (!first) return false;
    $(first).focus();
    announce('Please correct the highlighted field.');
    return true;
  }

  // unreachable says under the form that paysvc did not answer (a network failure).
  function unreachable() {
    formError('We could not reach the payment service. Check your connection and try again.');
    announce('We could not reach the payment service.');
  }

  // failure shows the failed view with the reason (fallback when none) and says so.
  function failure(reason, fallback, heading) {
    $('failed-reason').textContent = reason || fallback;
    show('failed');
    announce(heading + ' ' + $('failed-reason').textContent);
  }

  function postJSON(url, body, key) {
    var headers = { 'Content-Type': 'application/json', 'Accept': 'application/json' };
    if (key) headers['Idempotency-Key'] = key;
    return fetch(url, { method: 'POST', headers: headers, body: JSON.stringify(body), credentials: 'omit',
      cache: 'no-store' }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (j) { return { ok: r.ok, status: r.status, body: j }; });
    });
  }

  // redirectCountdown sends the customer to the merchant's page after a few
  // seconds, which they may stop (WCAG 2.2.1); returns what it says.
  function redirectCountdown(target, cont) {
    var left = REDIRECT_AFTER_S, note = $('redirect-note'), stay = $('stay');
    function say() { note.textContent = 'Returning you to ' + new URL(target).hostname + ' in ' + left + ' s.'; }
    say();
    note.hidden = false;
    stay.hidden = false;
    var timer = setInterval(function () {
      left -= 1;
      if (left > 0) { say(); return; }
      clearInterval(timer);
      window.location.assign(target);
    }, 1000);
    // Timed navigation must be stoppable (WCAG 2.2.1).
    stay.onclick = function () {
      clearInterval(timer);
      note.textContent = 'You can continue whenever you are ready.';
      stay.hidden = true;
      cont.focus();
    };
    return note.textContent;
  }

  // continueTo points the "Continue" link, when the page has one, at the merchant's
  // redirect with params added, from which the merchant's page learns what to
  // confirm (with its own key, never trusting the redirect itself), and starts the
  // countdown; returns what to say after the outcome ("" without a redirect).
  function continueTo(redirect, params) {
    var cont = $('continue');
    if (!cont || !redirect) return '';
    var u = new URL(redirect);
    Object.keys(params).forEach(function (k) { u.searchParams.set(k, params[k]); });
    cont.href = u.toString();
    return ' ' + redirectCountdown(u.toString(), cont);
  }

  function initCheckout(form) {
    var d = form.dataset;
    var attemptKey = newKey(); // one Idempotency-Key per attempt: a resent request never pays twice
    var busy = false;

    function method() {
      var checked = form.querySelector('input[name=method]:checked');
      return checked ? checked.value : 'mpesa';
    }

    // Only the chosen method's fields are shown and enabled, so Enter in any field
    // submits that method and the hidden one's fields are never sent or required.
    function syncMethod() {
      form.querySelectorAll('fieldset.method').forEach(function (fs) {
        var on = fs.dataset.method === method();
        fs.hidden = !on;
        fs.disabled = !on;
      });
    }
    form.querySelectorAll('input[name=method]').forEach(function (r) { r.addEventListener('change', syncMethod); });
    syncMethod();
    // The buttons come disabled: without this script the form must not submit at
    // all (the browser would send card or phone fields to the page's own address).
    form.querySelectorAll('button[type=submit]').forEach(function (b) { b.disabled = false; });

    function amountText() {
      return d.currency + ' ' + (d.amount || ($('amount') ? $('amount').value.trim() : ''));
    }

    function validate(m, body) {
      var ok = true, first = null;
      function bad(id, text) { setFieldError(id, text); ok = false; first = first || id; }
      if (!d.amount) {
        var a = $('amount').value.replace(/[\s,]/g, '');
        if (!/^[0-9]+(\.[0-9]{1,2})?$/.test(a) || Number(a) <= 0) bad('amount', 'Enter the amount to pay, for example 1500 or 1500.50.');
        body.amount = a;
      }
      if (m === 'mpesa') {
        var p = normalisePhone($('phone').value);
        if (!/^254[0-9*]{9}$/.test(p)) bad('phone', 'Enter your M-Pesa number, for example 0712 345 678.');
        body.phone_number = p;
      } else {
        readCard(body, bad);
      }
      if (first) $(first).focus();
      return ok;
    }

    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      if (busy) return;
      clearErrors();
      var m = method();
      var body = { checkout_id: d.checkout, signature: d.signature, currency: d.currency, api_ref: d.apiRef || 'checkout' };
      if (d.amount) body.amount = d.amount;
      if (!validate(m, body)) {
        announce('Please correct the highlighted field.');
        return;
      }
      if (m === 'mpesa') body.method = 'M-PESA';
      var button = form.querySelector('fieldset.method:not([disabled]) button[type=submit]');
      busy = true;
      button.disabled = true;
      announce('Starting your payment.');
      session().then(function (r) {
        if (!r.ok) return r;
        body.checkout_id = d.checkout;
        body.signature = d.signature;
        return postJSON(m === 'mpesa' ? '/api/v1/payment/collection/' : '/api/v1/payment/card/', body, attemptKey);
      }).then(function (r) {
        busy = false;
        button.disabled = false;
        if (!r.ok) {
          var item = r.body.errors && r.body.errors[0];
          var text = r.body.detail || 'The payment could not be started. Please try again.';
          if (!(item && item.attr && FIELD_INPUTS[item.attr] && setFieldError(FIELD_INPUTS[item.attr], text))) formError(text);
          if (item && item.attr && $(FIELD_INPUTS[item.attr])) $(FIELD_INPUTS[item.attr]).focus();
          announce(text);
          // The service answered: this attempt is over (its answer is what the key
          // would replay), so the corrected one is a new attempt.
          attemptKey = newKey();
          return;
        }
        var inv = r.body.invoice || {};
        wait(m, inv.invoice_id || inv.id, body.phone_number);
      }, function () {
        // The request may or may not have arrived: keep the key, so trying again
        // cannot start a second payment.
        busy = false;
        button.disabled = false;
        unreachable();
      });
    });

    // session resolves once the page has a checkout session to pay: a checkout page
    // has one; a payment link's page opens its own the first time the customer pays
    // and keeps it for every retry (the link's terms, never the page's).
    function session() {
      if (d.checkout || !d.link) return Promise.resolve({ ok: true });
      return postJSON('/pay/' + encodeURIComponent(d.link) + '/session/', {}).then(function (r) {
        if (r.ok) {
          d.checkout = r.body.checkout_id;
          d.signature = r.body.signature;
        }
        return r;
      });
    }

    function wait(m, invoiceID, phone) {
      $('wait-title').textContent = m === 'mpesa' ? 'Check your phone' : 'Processing your card payment';
      $('wait-detail').textContent = m === 'mpesa'
        ? 'Enter your M-Pesa PIN on ' + phone + ' to pay ' + amountText() + ' to ' + d.merchant + '.'
        : 'Please wait while your bank confirms the payment of ' + amountText() + '.';
      $('wait-stage').textContent = m === 'mpesa' ? 'Waiting for your PIN…' : 'Waiting for your bank…';
      $('check-again').hidden = true;
      show('wait');
      announce($('wait-title').textContent + '. ' + $('wait-detail').textContent);
      poll(m, invoiceID, Date.now());
    }

    function poll(m, invoiceID, started) {
      var lastStage = '';
      function tick() {
        postJSON('/api/v1/payment/status/', { invoice_id: invoiceID, checkout_id: d.checkout, signature: d.signature }).then(function (r) {
          var inv = r.ok && r.body.invoice;
          if (inv && inv.state === 'COMPLETE') return succeeded(m, inv);
          if (inv && inv.state === 'FAILED') return failure(inv.failed_reason, 'The payment was not completed.', 'Payment failed.');
          if (inv && inv.state === 'PROCESSING' && lastStage !== 'PROCESSING') {
            lastStage = 'PROCESSING';
            var text = m === 'mpesa' ? 'PIN received. Confirming your payment…' : 'Your bank is confirming the payment…';
            $('wait-stage').textContent = text;
            announce(text);
          }
          next();
        }, next);
      }
      function next() {
        if (Date.now() - started < POLL_FOR_MS) { setTimeout(tick, POLL_EVERY_MS); return; }
        var text = 'We have not received a confirmation yet. If you completed the payment, it will show here shortly.';
        $('wait-stage').textContent = text;
        announce(text);
        var again = $('check-again');
        again.hidden = false;
        again.onclick = function () { again.hidden = true; poll(m, invoiceID, Date.now()); };
        again.focus();
      }
      setTimeout(tick, POLL_EVERY_MS);
    }

    function succeeded(m, inv) {
      $('done-detail').textContent = 'You paid ' + inv.currency + ' ' + inv.value + ' to ' + d.merchant + '. Thank you.';
      var ref = $('done-ref');
      if (inv.mpesa_reference) {
        ref.textContent = 'M-Pesa reference: ' + inv.mpesa_reference;
        ref.hidden = false;
      }
      show('done');
      var said = $('done-title').textContent + '. ' + $('done-detail').textContent;
      announce(said + continueTo(d.redirect, { checkout_id: d.checkout, tracking_id: inv.invoice_id || inv.id }));
    }

    $('retry').addEventListener('click', function () {
      attemptKey = newKey();
      show('pay');
      var first = form.querySelector('fieldset.method:not([disabled]) input, #amount');
      if (first) first.focus();
      announce('Ready to try again.');
    });
  }

  var MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October',
    'November', 'December'];

  // longDate writes the API's YYYY-MM-DD as the pages do: "31 January 2025".
  function longDate(d) {
    var m = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/.exec(d || '');
    return m ? Number(m[3]) + ' ' + MONTHS[Number(m[2]) - 1] + ' ' + m[1] : (d || '');
  }

  // initSetup runs a subscription's setup page: the card goes to the setup
  // endpoint named by the page's token (the token is the only credential). The
  // issuer may ask for a challenge step: the page then asks for the code and sends
  // the card again with it. Declined: the failure screen, and Try again.
  function initSetup(form) {
    var d = form.dataset, busy = false, challenge = false;
    var button = $('setup-submit');
    button.disabled = false;

    function askChallenge(text) {
      challenge = true;
      var step = $('challenge-step');
      step.hidden = false;
      step.disabled = false;
      $('challenge').focus();
      announce(text);
    }

    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      if (busy) return;
      clearErrors();
      var body = {}, first = null;
      function bad(id, text) { setFieldError(id, text); first = first || id; }
      readCard(body, bad);
      if (challenge) {
        var code = $('challenge').value.replace(/\s/g, '');
        if (!/^[0-9A-Za-z]{4,12}$/.test(code)) bad('challenge', 'Enter the verification code your bank sent you.');
        body.challenge_code = code;
      }
      if (flagged(first)) return;
      busy = true;
      button.disabled = true;
      announce('Saving your card.');
      postJSON('/api/v1/subscriptions/setup/' + encodeURIComponent(d.setup) + '/', body).then(function (r) {
        busy = false;
        button.disabled = false;
        var item = (r.body.errors && r.body.errors[0]) || {};
        if (r.ok) return succeeded(r.body);
        if (item.code === 'challenge_required') {
          return askChallenge('Your bank asks you to verify this card. Enter the code it sent you.');
        }
        if (item.code === 'card_declined') return failure(item.detail || r.body.detail, 'Your card was declined.', 'Card declined.');
        refusal(r, 'Your card could not be saved. Please try again.');
      }, function () {
        busy = false;
        button.disabled = false;
        unreachable();
      });
    });

    function succeeded(sub) {
      $('done-title').textContent = 'Subscription active';
      var card = sub.card_number ? 'Your card ' + sub.card_number : 'Your card';
      $('done-detail').textContent = card + ' is saved: ' + d.merchant + ' charges it ' + d.amount + ' ' + d.every + '.';
      var next = $('done-next');
      if (sub.next_date) {
        next.textContent = 'Next charge: ' + longDate(sub.next_date);
        next.hidden = false;
      }
      show('done');
      var said = 'Subscription active. ' + $('done-detail').textContent + (sub.next_date ? ' ' + next.textContent + '.' : '');
      announce(said + continueTo(d.redirect, { subscription_id: sub.subscription_id || d.subscription }));
    }

    $('retry').addEventListener('click', function () {
      // Another card starts over: a challenge belongs to the card that asked for it.
      challenge = false;
      $('challenge-step').hidden = true;
      $('challenge-step').disabled = true;
      $('challenge').value = '';
      $('card-number').value = '';
      show('pay');
      $('card-number').focus();
      announce('Ready to try again.');
    });
  }

  // initSubscribe runs a plan's subscribe page: the customer's details make a
  // PENDING subscription (nothing is charged), and the page goes on to its setup
  // page for the card.
  function initSubscribe(form) {
    var d = form.dataset, busy = false;
    var button = $('subscribe-submit');
    button.disabled = false;
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      if (busy) return;
      clearErrors();
      var first = null;
      function bad(id, text) { setFieldError(id, text); first = first || id; }
      var body = {
        email: $('email').value.trim(),
        first_name: $('first-name').value.trim(),
        last_name: $('last-name').value.trim(),
        country: $('country').value.trim().toUpperCase(),
        zipcode: $('zipcode').value.trim()
      };
      if (!/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(body.email)) bad('email', 'Enter your email address, for example ann@example.com.');
      if (!/^[a-zA-Z0-9\-_ ]{1,45}$/.test(body.first_name)) bad('first-name', 'Enter your first name (letters, digits, spaces or hyphens).');
      if (!/^[a-zA-Z0-9\-_ ]{1,45}$/.test(body.last_name)) bad('last-name', 'Enter your last name (letters, digits, spaces or hyphens).');
      if (body.country && !/^[A-Z]{2}$/.test(body.country)) bad('country', 'Enter the two-letter country code, for example KE.');
      if (/^(US|CA|GB)$/.test(body.country) && !body.zipcode) bad('zipcode', 'Enter your postal code: it is required in the US, Canada and the UK.');
      if (!body.country) delete body.country;
      if (!body.zipcode) delete body.zipcode;
      if (flagged(first)) return;
      busy = true;
      button.disabled = true;
      announce('Creating your subscription.');
      postJSON('/subscribe/' + encodeURIComponent(d.plan) + '/', body).then(function (r) {
        if (r.ok && r.body.setup_url) {
          announce('Opening the card page.');
          // Only ever to paysvc's own setup page, whatever host the answer names.
          window.location.assign(new URL(r.body.setup_url).pathname);
          return;
        }
        busy = false;
        button.disabled = false;
        refusal(r, 'Your subscription could not be created. Please try again.');
      }, function () {
        busy = false;
        button.disabled = false;
        unreachable();
      });
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    var form = document.querySelector('form[data-checkout]');
    if (form) initCheckout(form);
    var setupForm = document.querySelector('form[data-setup]');
    if (setupForm) initSetup(setupForm);
    var subscribeForm = document.querySelector('form[data-plan]');
    if (subscribeForm) initSubscribe(subscribeForm);
  });
})();
