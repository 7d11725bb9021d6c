DROP TRIGGER IF EXISTS queue_key_update_trigger ON leasehold_job;
DROP TRIGGER IF EXISTS queue_key_insert_trigger ON leasehold_job;
DROP FUNCTION IF EXISTS leasehold_queue_key_add();
DROP TABLE IF EXISTS leasehold_queue_key;
