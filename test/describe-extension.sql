-- A description of the gibbs_nb extension as installed in this database, one
-- fact per line and sorted, with no OIDs: two databases whose descriptions
-- are the same have the same extension (test/schema-same.sh compares them).
-- Its members (pg_depend, deptype 'e'); each function's definition, ACL,
-- settings and properties, each aggregate's support functions; each
-- relation's columns in order (type, NOT NULL, default, storage, ACL, the
-- fast default), constraints, indexes, triggers, policies, ACL, row security
-- and options, a view's query, a sequence's parameters; types, event
-- triggers, the schema; every comment and every dependency between objects
-- of this database; the extension's version and its configuration tables.
-- (A column's pg_attver attribute option, which this machine's PostgreSQL 15
-- sets to a different number for every new column, is left out.)
WITH ext AS (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'gibbs_nb'),
m AS (SELECT d.classid, d.objid FROM pg_catalog.pg_depend d, ext
       WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext.oid
         AND d.deptype = 'e'),
-- the member relations, and the relations of member composite types
rel AS (SELECT m.objid AS oid FROM m WHERE m.classid = 'pg_catalog.pg_class'::regclass
        UNION
        SELECT t.typrelid FROM m JOIN pg_catalog.pg_type t ON t.oid = m.objid
         WHERE m.classid = 'pg_catalog.pg_type'::regclass AND t.typrelid <> 0),
fn AS (SELECT p.* FROM m JOIN pg_catalog.pg_proc p ON p.oid = m.objid
        WHERE m.classid = 'pg_catalog.pg_proc'::regclass),
facts(fact) AS (
  SELECT 'member ' || pg_catalog.pg_describe_object(m.classid, m.objid, 0) FROM m
  UNION ALL
  SELECT format('extension %s', row(e.extname, e.extowner::regrole, e.extnamespace::regnamespace,
                                    e.extrelocatable, e.extversion, e.extconfig::regclass[], e.extcondition))
    FROM pg_catalog.pg_extension e, ext WHERE e.oid = ext.oid
  UNION ALL
  SELECT format('function %s: %s', p.oid::regprocedure,
                row(p.proowner::regrole, p.proacl, p.proconfig, p.prokind, p.provolatile, p.proparallel,
                    p.prosecdef, p.proleakproof, p.proisstrict, p.proretset, p.procost, p.prorows,
                    p.prorettype::regtype, pg_catalog.pg_get_function_arguments(p.oid)))
    FROM fn p
  UNION ALL
  SELECT format('function %s is:%s', p.oid::regprocedure, pg_catalog.pg_get_functiondef(p.oid))
    FROM fn p WHERE p.prokind <> 'a'
  UNION ALL
  SELECT format('aggregate %s: %s', a.aggfnoid::regprocedure,
                row(a.aggkind, a.aggnumdirectargs, a.aggtransfn::oid::regprocedure,
                    a.aggfinalfn::oid::regprocedure, a.aggcombinefn::oid::regprocedure,
                    a.aggserialfn::oid::regprocedure, a.aggdeserialfn::oid::regprocedure,
                    a.aggmtransfn::oid::regprocedure, a.aggminvtransfn::oid::regprocedure,
                    a.aggmfinalfn::oid::regprocedure, a.aggfinalextra, a.aggmfinalextra,
                    a.aggfinalmodify, a.aggmfinalmodify, a.aggsortop::regoperator,
                    a.aggtranstype::regtype, a.aggtransspace, a.aggmtranstype::regtype,
                    a.aggmtransspace, a.agginitval, a.aggminitval))
    FROM fn p JOIN pg_catalog.pg_aggregate a ON a.aggfnoid = p.oid
  UNION ALL
  SELECT format('relation %s: %s', c.oid::regclass,
                row(c.relkind, c.relowner::regrole, c.relacl, c.relrowsecurity, c.relforcerowsecurity,
                    c.reloptions, c.relpersistence, c.relreplident, c.relnatts, c.reltoastrelid <> 0,
                    c.relhasindex, c.relhastriggers, c.relhasrules, c.relispartition, c.reloftype::regtype))
    FROM rel JOIN pg_catalog.pg_class c ON c.oid = rel.oid
  UNION ALL
  SELECT format('column %s.%s: %s', a.attrelid::regclass, pg_catalog.lpad(a.attnum::text, 3, '0'),
                row(a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,
                    pg_catalog.pg_get_expr(ad.adbin, ad.adrelid), a.attisdropped, a.attstorage,
                    a.attcompression, a.attidentity, a.attgenerated, a.attcollation::regcollation,
                    a.attstattarget, a.attacl, a.atthasdef, a.atthasmissing, a.attmissingval::text,
                    ARRAY(SELECT o FROM unnest(a.attoptions) o WHERE o NOT LIKE 'pg_attver=%'),
                    a.attfdwoptions, a.attislocal, a.attinhcount))
    FROM rel JOIN pg_catalog.pg_attribute a ON a.attrelid = rel.oid
    LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
   WHERE a.attnum > 0
  UNION ALL
  SELECT format('constraint %s on %s: %s', co.conname, co.conrelid::regclass,
                row(co.contype, pg_catalog.pg_get_constraintdef(co.oid), co.condeferrable, co.condeferred,
                    co.convalidated, co.conindid::regclass, co.conislocal, co.connoinherit))
    FROM rel JOIN pg_catalog.pg_constraint co ON co.conrelid = rel.oid
  UNION ALL
  SELECT format('index %s: %s', i.indexrelid::regclass,
                row(pg_catalog.pg_get_indexdef(i.indexrelid), i.indisprimary, i.indisunique,
                    i.indisreplident, i.indisclustered, i.indisvalid, c.reloptions))
    FROM rel JOIN pg_catalog.pg_index i ON i.indrelid = rel.oid
    JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
  UNION ALL
  SELECT format('trigger %s', pg_catalog.pg_get_triggerdef(t.oid))
    FROM rel JOIN pg_catalog.pg_trigger t ON t.tgrelid = rel.oid WHERE NOT t.tgisinternal
  UNION ALL
  SELECT format('policy %s on %s: %s', p.polname, p.polrelid::regclass,
                row(p.polcmd, p.polpermissive, p.polroles::regrole[],
                    pg_catalog.pg_get_expr(p.polqual, p.polrelid),
                    pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid)))
    FROM rel JOIN pg_catalog.pg_policy p ON p.polrelid = rel.oid
  UNION ALL
  SELECT format('view %s is:%s', c.oid::regclass, pg_catalog.pg_get_viewdef(c.oid))
    FROM rel JOIN pg_catalog.pg_class c ON c.oid = rel.oid WHERE c.relkind IN ('v', 'm')
  UNION ALL
  SELECT format('sequence %s: %s', s.seqrelid::regclass,
                row(s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmax, s.seqmin, s.seqcache,
                    s.seqcycle))
    FROM rel JOIN pg_catalog.pg_sequence s ON s.seqrelid = rel.oid
  UNION ALL
  SELECT format('type %s: %s', t.oid::regtype,
                row(t.typowner::regrole, t.typacl, t.typtype, t.typlen, t.typbyval, t.typalign,
                    t.typstorage, t.typcategory, t.typispreferred, t.typdelim, t.typinput::oid::regprocedure,
                    t.typoutput::oid::regprocedure, t.typreceive::oid::regprocedure,
                    t.typsend::oid::regprocedure, t.typmodin::oid::regprocedure,
                    t.typmodout::oid::regprocedure, t.typanalyze::oid::regprocedure,
                    t.typsubscript::oid::regprocedure, t.typelem::regtype, t.typarray::regtype,
                    t.typnotnull, t.typbasetype::regtype, t.typtypmod, t.typcollation::regcollation,
                    t.typdefault))
    FROM m JOIN pg_catalog.pg_type t ON t.oid = m.objid WHERE m.classid = 'pg_catalog.pg_type'::regclass
  UNION ALL
  SELECT format('event trigger %s: %s', e.evtname,
                row(e.evtevent, e.evtowner::regrole, e.evtfoid::regprocedure, e.evtenabled, e.evttags))
    FROM m JOIN pg_catalog.pg_event_trigger e ON e.oid = m.objid
   WHERE m.classid = 'pg_catalog.pg_event_trigger'::regclass
  UNION ALL
  SELECT format('schema %s: %s', n.nspname, row(n.nspowner::regrole, n.nspacl))
    FROM m JOIN pg_catalog.pg_namespace n ON n.oid = m.objid
   WHERE m.classid = 'pg_catalog.pg_namespace'::regclass
  UNION ALL
  -- comments and dependencies: of every object made in this database (its
  -- toast tables left out: they are named by OID)
  SELECT format('comment on %s: %s', pg_catalog.pg_describe_object(d.classoid, d.objoid, d.objsubid),
                d.description)
    FROM pg_catalog.pg_description d WHERE d.objoid >= 16384
  UNION ALL
  SELECT format('depend %s -> %s: %s', pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid),
                pg_catalog.pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid), d.deptype)
    FROM pg_catalog.pg_depend d
   WHERE d.objid >= 16384
     AND pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid) !~ 'pg_toast'
     AND pg_catalog.pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) !~ 'pg_toast')
SELECT fact FROM facts ORDER BY fact COLLATE "C";
