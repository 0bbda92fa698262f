/*
 * gnb_names.c
 *	  The samplers' names, as gibbs_nb_train takes them and models and
 *	  exports record them: one list for the server and the core (the
 *	  export format's fuzz target links this file alone).
 */
#include "gnb_sampler.h"

#include <string.h>

static const char *const sampler_names[] = {"paper", "collapsed", "blocked"};

const char *
gnb_sampler_name(gnb_sampler_kind kind)
{
	if ((int) kind < 0 || (size_t) kind >= sizeof(sampler_names) / sizeof(sampler_names[0]))
		return "unknown";
	return sampler_names[kind];
}

int
gnb_sampler_from_name(const char *name)
{
	for (size_t i = 0; i < sizeof(sampler_names) / sizeof(sampler_names[0]); i++)
		if (strcmp(name, sampler_names[i]) == 0)
			return (int) i;
	return -1;
}
