-- Completed card collections waiting to clear: the clearing job reads only these.
CREATE INDEX invoices_uncleared_card ON invoices (updated_at)
    WHERE state = 'COMPLETE' AND data ->> 'provider' = 'CARD' AND coalesce((data ->> 'cleared')::boolean, false) = false;
