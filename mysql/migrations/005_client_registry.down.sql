DROP TABLE IF EXISTS leasehold_client;
