-- 007_audit_prune.sql — pruning the sign-in audit without giving the service the right to delete it.
--
-- With the roles of sql/roles.sql the service's role may only INSERT into signin.sign_ins: a compromised
-- responder can neither read the trail nor erase or rewrite it. `tokensignin prune` runs as that same role (the
-- same unit, account and settings as the responder: no owner's credential on the host for an hourly job), so it
-- deletes old audit rows through this function, which runs with its owner's rights (SECURITY DEFINER) and deletes
-- only rows older than the retention, never one younger than 7 days. Forward-only; no BEGIN/COMMIT in here.

CREATE FUNCTION signin.prune_sign_ins(retention interval, batch integer) RETURNS integer
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    -- A SECURITY DEFINER function must not resolve names through a search_path its caller controls.
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deleted integer;
BEGIN
    IF retention IS NULL OR retention < interval '7 days' THEN
        RAISE EXCEPTION 'audit retention must be at least 7 days, got %', retention
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF batch IS NULL OR batch < 1 OR batch > 100000 THEN
        RAISE EXCEPTION 'batch must be 1...100000, got %', batch USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- One short batch, oldest first along sign_ins_at_idx, deleted by primary key: the ORDER BY and the ARRAY keep
    -- that plan when PL/pgSQL switches to a generic one that knows neither the retention nor the batch size. Rows
    -- another transaction holds wait for the next run.
    DELETE FROM signin.sign_ins WHERE id = ANY (ARRAY(
        SELECT id FROM signin.sign_ins WHERE at < now() - retention
         ORDER BY at LIMIT batch FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;

-- Functions are executable by PUBLIC unless revoked; sql/roles.sql grants this one to the service's role only.
REVOKE ALL ON FUNCTION signin.prune_sign_ins(interval, integer) FROM PUBLIC;

COMMENT ON FUNCTION signin.prune_sign_ins(interval, integer) IS
    'tokensignin prune: deletes up to batch audit rows older than retention (at least 7 days) and returns how many. '
    'Runs as the schema owner, so the service''s role needs no DELETE (nor SELECT) on signin.sign_ins.';
