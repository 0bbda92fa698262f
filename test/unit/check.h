/*
 * check.h
 *	  The unit tests' one assertion: CHECK(cond, printf-style message)
 *	  counts a pass, or counts a failure and prints where and why, without
 *	  stopping, so that one run reports every failing check.  A test program
 *	  ends with check_report(), which prints "N passed, N failed" (the line
 *	  test/run-tests.sh and the Makefile's unit target rely on) and gives
 *	  the exit status.
 *
 *	  Included by exactly one translation unit per test program: the
 *	  counters are file-static.
 */
#ifndef GNB_TEST_CHECK_H
#define GNB_TEST_CHECK_H

#include <stdio.h>

static int	n_passed = 0;
static int	n_failed = 0;

#define CHECK(cond, ...) \
	do { \
		if (cond) n_passed++; \
		else { n_failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			   printf(__VA_ARGS__); printf("\n"); } \
	} while (0)

/* Print the totals; the test program's exit status: 0 if nothing failed. */
static inline int
check_report(void)
{
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}

#endif							/* GNB_TEST_CHECK_H */
