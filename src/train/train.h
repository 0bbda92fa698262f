/*
 * train/train.h
 *	  The caller's side of training: gibbs_nb_train and gibbs_nb_retrain's
 *	  arguments (train.c), and launching, following and cancelling a job's
 *	  worker (launch.c).
 */
#ifndef GNB_TRAIN_TRAIN_H
#define GNB_TRAIN_TRAIN_H

#include "gibbs_nb.h"

/* launch.c: launch a worker for a job and follow it */
extern void gnb_run_job(GnbJobParams *params, bool wait, GnbJobOutcome *outcome);
/* train.c: the training path shared by gibbs_nb_train and gibbs_nb_retrain */
extern void gnb_train_call(FunctionCallInfo fcinfo, const char *model_owner,
						   int64 warm_version_id);

#endif							/* GNB_TRAIN_TRAIN_H */
