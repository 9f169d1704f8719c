-- roles.sql — least-privilege PostgreSQL roles for tokensignin. A psql script, NOT a migration (`tokensignin
-- migrate` ignores files without a number): roles belong to the whole cluster and their names are the site's
-- choice, which a migration cannot know. Run it as a superuser (Debian: the postgres account), in the
-- tokensignin database, after every `tokensignin migrate` (it is idempotent); docs/database.md "Roles":
--
--   psql -d tokensignin -f sql/roles.sql                           # the recommended names below
--   psql -d tokensignin -v app=tokensignin -f sql/roles.sql        # another name for a role (here: peer
--                                                                  # authentication as the system user)
--
-- owner  (tokensignin_owner, created NOLOGIN): owns the schema signin and everything in it; migrations run as
--        it (`tokensignin migrate --role tokensignin_owner` from a login that is a member of it).
-- app    (tokensignin_app, created LOGIN): the responder, `tokensignin prune` and `tokensignin sessions`;
--        exactly the privileges their statements need, the audit insert-only.
-- reader (tokensignin_reader, created NOLOGIN): analysts; SELECT on the tables and views, nothing else
--        (`GRANT tokensignin_reader TO alice`).
--
-- Roles that exist keep their attributes (LOGIN, password). Whatever in the schema belongs to another role (a
-- migrate run as a superuser, or the single role of an older deployment) is handed to the owner, as is the
-- database; the app and reader roles lose every privilege on the database and the schema that is not below.
-- Default privileges give objects later migrations create (as the owner) the same shape without a new run:
-- tables SELECT, INSERT, UPDATE for app and SELECT for reader, functions EXECUTE for app only. Running the
-- script again after each migrate makes the grants exactly these again.
\set ON_ERROR_STOP on
\if :{?owner}
\else
    \set owner tokensignin_owner
\endif
\if :{?app}
\else
    \set app tokensignin_app
\endif
\if :{?reader}
\else
    \set reader tokensignin_reader
\endif

BEGIN;
-- The names reach the DO blocks below as settings of this transaction (psql does not expand :'x' in $$ $$).
SELECT set_config('tokensignin.owner', :'owner', true), set_config('tokensignin.app', :'app', true),
       set_config('tokensignin.reader', :'reader', true) \g /dev/null

DO $$
DECLARE
    owner  CONSTANT text := current_setting('tokensignin.owner');
    app    CONSTANT text := current_setting('tokensignin.app');
    reader CONSTANT text := current_setting('tokensignin.reader');
    name   text;
BEGIN
    FOREACH name IN ARRAY ARRAY[owner, app, reader] LOOP
        IF name !~ '^[a-z_][a-z0-9_]{0,62}$' THEN
            RAISE EXCEPTION 'role name "%" is not a plain lower-case identifier', name;
        END IF;
    END LOOP;
    IF owner = app OR owner = reader OR app = reader THEN
        RAISE EXCEPTION 'owner, app and reader must be three different roles (got %, %, %)', owner, app, reader;
    END IF;
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'run this script as a superuser (it creates roles and hands over ownership)';
    END IF;

    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = owner) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', owner);
        RAISE NOTICE 'created role % (NOLOGIN)', owner;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = app) THEN
        EXECUTE format('CREATE ROLE %I LOGIN', app);
        RAISE NOTICE 'created role % (LOGIN, no password: set one for TCP logins)', app;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = reader) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', reader);
        RAISE NOTICE 'created role % (NOLOGIN: GRANT it to the analysts'' own roles)', reader;
    END IF;

    -- A role that is a superuser, bypasses row security or inherits the owner has privileges no grant can take away.
    FOREACH name IN ARRAY ARRAY[app, reader] LOOP
        IF (SELECT rolsuper OR rolbypassrls OR rolcreaterole OR rolcreatedb FROM pg_roles WHERE rolname = name) THEN
            RAISE EXCEPTION 'role % is a superuser or may create roles, databases or bypass row security: it cannot be least-privilege', name;
        END IF;
        IF pg_has_role(name, owner, 'USAGE') THEN
            RAISE EXCEPTION 'role % is a member of %: it would have all of the owner''s rights', name, owner;
        END IF;
    END LOOP;

    EXECUTE format('COMMENT ON ROLE %I IS %L', owner,
        'tokensignin: owns the schema signin and everything in it; tokensignin migrate runs as it (sql/roles.sql).');
    EXECUTE format('COMMENT ON ROLE %I IS %L', app,
        'tokensignin: the responder, tokensignin prune and tokensignin sessions; only what their statements need, '
        || 'the sign-in audit insert-only (sql/roles.sql).');
    EXECUTE format('COMMENT ON ROLE %I IS %L', reader,
        'tokensignin: analysts and support, SELECT on the tables and views of signin, nothing else (sql/roles.sql).');
END
$$;

-- The database: the owner creates the schema (migrations say CREATE SCHEMA IF NOT EXISTS, which needs CREATE on
-- the database even when the schema exists), the others only connect.
SELECT format('ALTER DATABASE %I OWNER TO %I', current_database(), :'owner') \gexec
SELECT format('REVOKE ALL ON DATABASE %I FROM %I, %I', current_database(), :'app', :'reader') \gexec
SELECT format('GRANT CONNECT ON DATABASE %I TO %I, %I', current_database(), :'app', :'reader') \gexec

-- The schema and everything in it belong to the owner.
CREATE SCHEMA IF NOT EXISTS signin AUTHORIZATION :"owner";
DO $$
DECLARE
    owner CONSTANT text := current_setting('tokensignin.owner');
    object record;
BEGIN
    IF (SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'signin') <> owner THEN
        EXECUTE format('ALTER SCHEMA signin OWNER TO %I', owner);
        RAISE NOTICE 'schema signin now belongs to %', owner;
    END IF;
    -- Tables and views (an identity sequence and the indexes follow their table).
    FOR object IN
        SELECT c.oid::regclass AS name, c.relkind FROM pg_class c
         WHERE c.relnamespace = 'signin'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
           AND c.relowner <> owner::regrole
           AND NOT (c.relkind = 'S' AND EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i')))
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO %I',
                       CASE object.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                           WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, object.name, owner);
        RAISE NOTICE '% now belongs to %', object.name, owner;
    END LOOP;
    FOR object IN
        SELECT p.oid::regprocedure AS name FROM pg_proc p
         WHERE p.pronamespace = 'signin'::regnamespace AND p.proowner <> owner::regrole
    LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO %I', object.name, owner);
        RAISE NOTICE '% now belongs to %', object.name, owner;
    END LOOP;
    -- Domains and composite types (015); a table's row type and an array type follow their table and element.
    FOR object IN
        SELECT t.oid::regtype AS name, t.typtype FROM pg_type t
         WHERE t.typnamespace = 'signin'::regnamespace AND t.typowner <> owner::regrole
           AND (t.typtype = 'd' OR (t.typtype = 'c' AND (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c'))
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO %I', CASE object.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END,
                       object.name, owner);
        RAISE NOTICE '% now belongs to %', object.name, owner;
    END LOOP;
END
$$;

-- From a clean slate: nothing for app, reader and PUBLIC on the schema and its objects...
REVOKE ALL ON SCHEMA signin FROM PUBLIC, :"app", :"reader";
REVOKE ALL ON ALL TABLES IN SCHEMA signin FROM PUBLIC, :"app", :"reader";
REVOKE ALL ON ALL SEQUENCES IN SCHEMA signin FROM PUBLIC, :"app", :"reader";
REVOKE ALL ON ALL ROUTINES IN SCHEMA signin FROM PUBLIC, :"app", :"reader";
GRANT USAGE ON SCHEMA signin TO :"app", :"reader";

-- ...then what the service's statements need (docs/database.md "Roles" says which statement needs what), on
-- the tables that exist (before the first migrate: none). DELETE on sessions: tokensignin prune. The audit is
-- written, never read, changed or deleted by the service: prune goes through signin.prune_sign_ins (007).
-- schema_migrations and the views: nothing. A table of a later migration this script does not know yet gets what
-- the default privileges give.
SELECT format('GRANT %s ON %s TO %I', coalesce(model.privileges, 'SELECT, INSERT, UPDATE'), c.oid::regclass, :'app')
  FROM pg_class c
  LEFT JOIN (VALUES ('users', 'SELECT, INSERT, UPDATE'),
                    ('sessions', 'SELECT, INSERT, UPDATE, DELETE'),
                    ('sign_ins', 'INSERT'),
                    ('security_events', 'SELECT, INSERT'),
                    ('service_settings', 'SELECT, INSERT, UPDATE')) AS model (name, privileges)
         ON model.name = c.relname
 WHERE c.relnamespace = 'signin'::regnamespace AND c.relkind IN ('r', 'p') AND c.relname <> 'schema_migrations'
\gexec
GRANT EXECUTE ON ALL ROUTINES IN SCHEMA signin TO :"app";

GRANT SELECT ON ALL TABLES IN SCHEMA signin TO :"reader";

-- Objects the owner creates later (migrations).
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA signin GRANT SELECT, INSERT, UPDATE ON TABLES TO :"app";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA signin GRANT SELECT ON TABLES TO :"reader";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA signin GRANT EXECUTE ON FUNCTIONS TO :"app";

-- Names the service's statements do not qualify (functions, operators, types) resolve in signin, then pg_catalog:
-- never in a schema where another role may create objects (public, or one named after the role), where a planted
-- function or operator could shadow the one a statement means. Only the owner creates objects in signin.
ALTER ROLE :"app" SET search_path = signin, pg_catalog;
-- PostgreSQL 15 no longer lets every role create objects in public for a new database, but a database created by
-- an older release (and upgraded) still does.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
COMMIT;
