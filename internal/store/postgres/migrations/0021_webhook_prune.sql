-- Outbox pruning (issue 14): final deliveries (delivered or dead) are
-- deleted once their last attempt is older than the [webhooks] retention;
-- this index finds them without scanning the pending ones.
CREATE INDEX webhook_deliveries_final ON webhook_deliveries (updated_at) WHERE status <> 'pending';
