# Helpers shared by the TAP tests (test/t/*.pl); test/run-tests.sh puts this
# directory on Perl's include path.
package GibbsNbTest;

use strict;
use warnings;
use Exporter 'import';

our @EXPORT = qw(create_docs);

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

1;
