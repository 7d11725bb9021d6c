DROP TABLE IF EXISTS leasehold_queue;
