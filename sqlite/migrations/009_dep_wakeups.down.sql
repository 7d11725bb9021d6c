DROP TRIGGER IF EXISTS leasehold_job_dep_wakeup;
