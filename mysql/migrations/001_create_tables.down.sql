DROP TABLE IF EXISTS leasehold_attempt;
DROP TABLE IF EXISTS leasehold_job;
