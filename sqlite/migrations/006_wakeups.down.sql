DROP TABLE IF EXISTS leasehold_wakeup;
