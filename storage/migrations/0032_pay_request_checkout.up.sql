-- The hosted checkout page shows the reason of the pay request that emailed it (the
-- spec's pay request page); the page is public, so it finds the request by index.
CREATE INDEX pay_requests_checkout ON pay_requests (checkout_id);
