# Helpers shared by the TAP tests (test/t/*.pl); test/run-tests.sh puts this
# directory on Perl's include path.
package GibbsNbTest;

use strict;
use warnings;
use Exporter 'import';

our @EXPORT = qw(create_docs create_doc_labels);

# A table of 3,000 documents of 50 words, a quarter of them labelled 'a' or
# 'b': enough work that a job of many sweeps runs until it is stopped.
# $table may be schema-qualified; %psql_opts go to safe_psql (e.g. the role).
sub create_docs
{
	my ($node, $table, %psql_opts) = @_;
	$node->safe_psql('postgres', qq{
	  CREATE TABLE $table (id int PRIMARY KEY, tokens text[], label text);
	  INSERT INTO $table
	  SELECT i, array(SELECT 'w' || ((i * 7 + k * 13) % 500) FROM generate_series(1, 50) k),
	         CASE WHEN i % 4 = 0 THEN (ARRAY['a', 'b'])[1 + (i / 4) % 2] END
	  FROM generate_series(1, 3000) i;
	}, %psql_opts);
	return;
}

# doc_labels(version_id): a version's documents' labels
# (gibbs_nb.document_labels) as one value, each id with its probabilities, by
# id: two versions' are equal when they gave the same documents the same
# probabilities, bit for bit (float8 text is its shortest exact form).  For
# every role: the table's row security decides what it sees.  PL/pgSQL: Citus
# plans no parameter of a SQL function's query.
sub create_doc_labels
{
	my ($node) = @_;
	$node->safe_psql('postgres', q{
	  CREATE FUNCTION public.doc_labels(v bigint) RETURNS text[] LANGUAGE plpgsql STABLE AS $$
	  BEGIN
	    RETURN (SELECT pg_catalog.array_agg(d.id || '=' || d.probabilities::text ORDER BY d.id COLLATE "C")
	            FROM gibbs_nb.document_labels d WHERE d.version_id = v);
	  END $$;
	});
	return;
}

1;
