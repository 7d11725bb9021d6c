-- leasehold:compatible-with 7
-- Leasehold schema, version 8: fenced stage checkpoints and job
-- dependencies.
--
-- stage and stage_state hold the last stage a lease checkpointed and its
-- JSON state (leasehold.Checkpoint); leasehold_stage keeps every checkpoint.
--
-- A job inserted with dependencies waits in state 'pending', deps_pending
-- counting the dependencies not yet completed, one leasehold_job_dep row per
-- edge. MySQL and MariaDB forbid a trigger to write the table whose change
-- fired it, so the driver releases and cancels dependents itself, in the
-- transaction that changes the parent's state (the completion, an
-- operator's state change, an expiry); has_dependents lets it skip that for
-- jobs nobody waits on.
--
-- The state CHECK of version 1 has no name of its own: MariaDB keeps it
-- with the column (named state), which a MODIFY without it drops; MySQL
-- makes it a table constraint leasehold_job_chk_N, found by its clause and
-- dropped (as is the named one a down migration of this version leaves).
-- Both then get a named table constraint. Binaries that know version 7 never see a
-- pending job (they claim, expire and prune other states only), hence the
-- declaration above.
SET @leasehold_state_check = (
    SELECT tc.CONSTRAINT_NAME
    FROM information_schema.TABLE_CONSTRAINTS tc
    JOIN information_schema.CHECK_CONSTRAINTS cc
        ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME
    WHERE tc.TABLE_SCHEMA = DATABASE() AND tc.TABLE_NAME = 'leasehold_job'
        AND tc.CONSTRAINT_TYPE = 'CHECK'
        AND cc.CHECK_CLAUSE LIKE '%retryable%' AND cc.CHECK_CLAUSE LIKE '%stuck%'
        AND cc.CHECK_CLAUSE NOT LIKE '%pending%'
    LIMIT 1);
SET @leasehold_sql = IF(VERSION() LIKE '%MariaDB%' AND @leasehold_state_check = 'state',
    'ALTER TABLE leasehold_job MODIFY COLUMN state VARCHAR(16) NOT NULL DEFAULT ''available''',
    CONCAT('ALTER TABLE leasehold_job DROP CONSTRAINT `', @leasehold_state_check, '`'));
PREPARE leasehold_stmt FROM @leasehold_sql;
EXECUTE leasehold_stmt;
DEALLOCATE PREPARE leasehold_stmt;

ALTER TABLE leasehold_job
    ADD COLUMN stage VARCHAR(128),
    ADD COLUMN stage_state LONGTEXT,
    ADD COLUMN deps_pending INT NOT NULL DEFAULT 0,
    ADD COLUMN has_dependents BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN dependency_policy VARCHAR(8) NOT NULL DEFAULT 'cancel',
    ADD COLUMN cancelled_by_dep BIGINT;

ALTER TABLE leasehold_job
    ADD CONSTRAINT leasehold_job_state_check CHECK (state IN
        ('pending', 'available', 'scheduled', 'running', 'retryable',
         'completed', 'discarded', 'cancelled', 'stuck')),
    ADD CONSTRAINT leasehold_job_stage_check CHECK (stage IS NULL OR LENGTH(stage) BETWEEN 1 AND 128),
    ADD CONSTRAINT leasehold_job_stage_state_check CHECK (stage_state IS NULL OR JSON_VALID(stage_state)),
    ADD CONSTRAINT leasehold_job_dependency_policy_check CHECK (dependency_policy IN ('cancel', 'wait', 'any'));

CREATE TABLE leasehold_stage (
    id      BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id  BIGINT       NOT NULL,
    attempt INT          NOT NULL,
    token   BIGINT       NOT NULL,
    stage   VARCHAR(128) NOT NULL,
    state   LONGTEXT,
    at      DATETIME(6)  NOT NULL,
    KEY leasehold_stage_job_idx (job_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE leasehold_job_dep (
    parent_id BIGINT  NOT NULL,
    child_id  BIGINT  NOT NULL,
    satisfied BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (parent_id, child_id),
    KEY leasehold_job_dep_child_idx (child_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
