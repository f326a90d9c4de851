-- Pay requests: a checkout session emailed to a customer, with its delivery status
-- and reminder. Not money state: the API writes them.
CREATE TABLE pay_requests (
    request_id         text PRIMARY KEY,
    merchant_id        text NOT NULL REFERENCES merchants (merchant_id),
    checkout_id        uuid NOT NULL REFERENCES checkouts (checkout_id),
    first_name         text NOT NULL,
    last_name          text NOT NULL,
    email              text NOT NULL,
    reason             text NOT NULL DEFAULT '',
    autosend_reminder  integer NOT NULL DEFAULT 0,
    reminder_due_at    timestamptz,
    reminder_sent      boolean NOT NULL DEFAULT false,
    sent_status        text NOT NULL DEFAULT 'PENDING',
    failed_details     text,
    archived           boolean NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pay_requests_reminders ON pay_requests (reminder_due_at) WHERE NOT reminder_sent AND reminder_due_at IS NOT NULL;
