-- The sandbox refund rail (refundkind.Simulate, storage.RailRefunds) now works on
-- DISPUTED refunds too (it closes them one delay later: a merchant can no longer
-- cancel a refund that is with the rail, docs/state-machines.md), and reads per
-- merchant (row_number over merchant_id) so that no merchant starves another.
-- 0026's refunds_waiting covered PENDING and OVERDUE by updated_at alone.
-- The number leaves room for migrations other branches of issue 22 may add.
DROP INDEX IF EXISTS refunds_waiting;
CREATE INDEX refunds_rail_waiting ON refunds (merchant_id, updated_at, id) WHERE status IN ('PENDING', 'DISPUTED', 'OVERDUE');
