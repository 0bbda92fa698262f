/*
 * models/models.h
 *	  What a user does with a whole model: drop and deploy (model.c),
 *	  export and import (export.c) in the exported format (model_format.c).
 */
#ifndef GNB_MODELS_MODELS_H
#define GNB_MODELS_MODELS_H

#include "gibbs_nb.h"

/*
 * model_format.c: the exported model (gibbs_nb_export, gibbs_nb_import), a
 * versioned, self-describing bytea; see model_format.c and docs/reference.md.
 */
#define GNB_MODEL_FORMAT 2
#define GNB_MODEL_HAS_COUNTS 0x1
extern void gnb_model_image_parse(const char *data, Size size, GnbModelImage *img);
extern void gnb_model_image_write(const GnbModelImage *img, StringInfo s);

#endif							/* GNB_MODELS_MODELS_H */
