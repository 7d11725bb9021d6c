DROP TABLE IF EXISTS leasehold_audit;
