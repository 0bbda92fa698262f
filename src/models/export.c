/*
 * export.c
 *	  Moving a model between databases: gibbs_nb_export writes the version a
 *	  name serves as one bytea (model_format.c), gibbs_nb_import makes a new
 *	  version of the caller's model of one.
 *
 * The value carries log pi-hat and log theta-hat bit for bit, so the
 * imported version predicts exactly as the exported one.  What it cannot
 * carry is the source (an OID of the other database) and the documents'
 * labels: an imported version cannot be retrained or deployed, and has no
 * labels table.
 */
#include "gibbs_nb.h"

#include "models/models.h"
#include "predict/predict.h"
#include "store/store.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

/* what an import holds at its peak, in multiples of the value (see below) */
#define IMPORT_MEMORY_FACTOR 5.0

PG_FUNCTION_INFO_V1(gibbs_nb_export);
PG_FUNCTION_INFO_V1(gibbs_nb_import);

/*
 * gibbs_nb_export(model_name text) returns bytea
 *
 * The version the name serves for the calling role (as prediction finds
 * it), with its parameters, as one value of the documented format.
 */
Datum
gibbs_nb_export(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	GnbServingModel m;
	GnbPackedModel p;
	GnbModelImage img;
	StringInfoData out;
	bytea	   *result;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model_name must not be NULL")));
	gnb_serving_model_view(fcinfo, PG_GETARG_TEXT_PP(0), &m);

	SPI_connect();
	memset(&img, 0, sizeof(img));
	gnb_store_packed_model(m.version_id, &p);
	gnb_store_export_params(m.version_id, &img);
	img.n_classes = p.n_classes;
	img.n_words = p.n_words;
	img.class_str = palloc(sizeof(char *) * p.n_classes);
	img.class_len = palloc(sizeof(int32) * p.n_classes);
	for (int32 k = 0; k < p.n_classes; k++)
	{
		img.class_str[k] = VARDATA_ANY(DatumGetPointer(p.classes[k]));
		img.class_len[k] = VARSIZE_ANY_EXHDR(DatumGetPointer(p.classes[k]));
	}
	img.word_str = palloc_extended(sizeof(char *) * ((Size) p.n_words + 1), MCXT_ALLOC_HUGE);
	img.word_len = palloc_extended(sizeof(int32) * ((Size) p.n_words + 1), MCXT_ALLOC_HUGE);
	for (int32 w = 0; w < p.n_words; w++)
	{
		img.word_str[w] = VARDATA_ANY(DatumGetPointer(p.tokens[w]));
		img.word_len[w] = VARSIZE_ANY_EXHDR(DatumGetPointer(p.tokens[w]));
	}
	img.log_pi = (double *) p.log_pi;
	img.log_theta = (double *) p.log_theta;
	img.word_counts = (int64 *) p.word_counts;

	/* the value outlives SPI: written in the caller's context */
	MemoryContextSwitchTo(caller);
	initStringInfo(&out);
	appendStringInfoSpaces(&out, VARHDRSZ);
	gnb_model_image_write(&img, &out);
	result = (bytea *) out.data;
	SET_VARSIZE(result, out.len);
	SPI_finish();
	PG_RETURN_BYTEA_P(result);
}

/*
 * gibbs_nb_import(model_name text, value bytea) returns int
 *
 * A new version of the current role's model model_name (created if it has
 * none) made of an exported value; returns its version.  A value that is
 * not one gibbs_nb_export wrote, or is malformed, is an error (22P03, or
 * 22021 for text not valid in this database's encoding), before anything is
 * written.
 */
Datum
gibbs_nb_import(PG_FUNCTION_ARGS)
{
	char	   *model_name;
	bytea	   *value;
	GnbModelImage img;
	int32		version;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", PG_ARGISNULL(0) ? "model_name" : "value")));
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (model_name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model_name must not be empty")));
	if (strlen(model_name) > GNB_MODEL_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("model name \"%s\" is longer than %d bytes", model_name, GNB_MODEL_NAME_MAX)));
	value = PG_GETARG_BYTEA_PP(1);

	/*
	 * Parsing holds the numbers once more, writing the rows builds the
	 * arrays from them, and the row is formed from the arrays: a 66.8 MB
	 * value (2.5 million tokens, 2 classes) takes the backend to about 300
	 * MB, 4.5 times it (make bench-import).  Bounded, with five times the
	 * value, by the caller's
	 * gibbs_nb.max_job_memory as a training job is.
	 */
	if (IMPORT_MEMORY_FACTOR * VARSIZE_ANY_EXHDR(value) > (double) gnb_max_job_memory_kb * 1024.0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("importing this gibbs_nb model would need about %.1f MB, more than gibbs_nb.max_job_memory (%.1f MB)",
						IMPORT_MEMORY_FACTOR * VARSIZE_ANY_EXHDR(value) / (1024.0 * 1024.0),
						gnb_max_job_memory_kb / 1024.0),
				 errhint("Have a superuser raise gibbs_nb.max_job_memory (it can be set per role).")));
	gnb_model_image_parse(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value), &img);
	gnb_check_image_dumpable(&img);

	SPI_connect();
	version = gnb_store_import(model_name, &img);
	SPI_finish();
	PG_RETURN_INT32(version);
}
