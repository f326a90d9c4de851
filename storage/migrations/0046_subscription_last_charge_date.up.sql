-- A date is charged once (actors/subscription, State.LastChargeDate): no cycle is
-- charged, and no next_date set, on or before the date of a subscription's last
-- charge. Snapshots stored before the state kept that date get it from their
-- recorded charges, so a PUT next_date cannot charge their last date again.
UPDATE subscriptions s
   SET data = jsonb_set(s.data, '{last_charge_date}', to_jsonb(d.last_date))
  FROM (SELECT subscription_id, to_char(max(cycle_date), 'YYYY-MM-DD') AS last_date
          FROM subscription_invoices GROUP BY subscription_id) d
 WHERE d.subscription_id = s.subscription_id
   AND NOT s.data ? 'last_charge_date';
