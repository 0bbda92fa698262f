/*
 * detoast.c
 *	  Detoasting a document's tokens for prediction, pglz decompressed by a
 *	  decoder of our own.
 *
 * A text[] of a whole e-mail is pglz-compressed (the default) and stored out
 * of line: detoasting it, mostly decompressing, is about as much of
 * gibbs_nb_predict's time as the scoring itself.  PostgreSQL's
 * pglz_decompress copies every match with a call to memcpy and every literal
 * byte by byte, with a branch per item; the decoder below moves the literals
 * between two matches together and copies a match 8 bytes at a time,
 * without a call or a check of the end per piece, wherever the end is far
 * enough away.  It reads the same format (src/common/pg_lzcompress.c,
 * which the on-disk format fixes), accepts exactly the input PostgreSQL's
 * accepts (with check_complete) and writes the same bytes; anything else
 * (lz4, an uncompressed value) is detoasted by PostgreSQL.
 *
 * Also the allocator the prediction index and the detoasted values share
 * (gnb_alloc_huge): cache-line aligned, in huge pages from 2 MB.
 */
#include "predict/vocab_index.h"

#include <sys/mman.h>

#include "access/detoast.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/toast_compression.h"
#include "fmgr.h"
#include "port/pg_bitutils.h"
#include "utils/rel.h"

/* Transparent huge pages' size on x86-64 and arm64 (4 kB base pages). */
#define HUGE_PAGE ((Size) 2 * 1024 * 1024)

/*
 * Allocate `size` bytes in the current memory context, aligned to a cache
 * line (so that no entry of 32 bytes spans two) and, from 2 MB up, to 2 MB,
 * asking Linux for transparent huge pages over it (where it has them only
 * on request) before it is first written.  For the index's table, which
 * lookups touch at random: a lookup then costs a cache miss but not also a
 * TLB miss and a page walk.  For whatever a model's load writes once: a
 * new process (a parallel worker loading the model) takes a fault per 2 MB
 * instead of one per 4 kB page, each costing about as much as a page of
 * 4 kB (on the development machine's virtual machine, about 1.5 us: 3 ms
 * for the 8 MB table in 4 kB pages, 0.2 ms in huge ones).  The size is
 * rounded up to whole huge pages, so that no advice reaches past the
 * allocation; the alignment's slack is never written, so never backed by
 * memory.  Only a hint: nothing changes where the kernel declines.  *chunk
 * is set to what to pfree.
 */
void *
gnb_alloc_huge(Size size, void **chunk)
{
	char	   *p;

#ifdef MADV_HUGEPAGE
	if (size >= HUGE_PAGE)
	{
		/* whole huge pages, all of them this allocation's */
		size = TYPEALIGN(HUGE_PAGE, size);
		p = MemoryContextAllocExtended(CurrentMemoryContext, size + HUGE_PAGE,
									   MCXT_ALLOC_HUGE);
		*chunk = p;
		p = (char *) TYPEALIGN(HUGE_PAGE, p);
		(void) madvise(p, size, MADV_HUGEPAGE);
		return p;
	}
#endif
	p = MemoryContextAllocExtended(CurrentMemoryContext, size + PG_CACHE_LINE_SIZE,
								   MCXT_ALLOC_HUGE);
	*chunk = p;
	return (char *) TYPEALIGN(PG_CACHE_LINE_SIZE, p);
}

/*
 * Decompress pglz data [sp, srcend) into dest, rawsize bytes.  Returns false
 * if the data is corrupt: as pglz_decompress(..., check_complete = true)
 * returns -1, reading no byte outside the input.
 *
 * A control byte's 8 bits say which of the next 8 items are matches (1)
 * and which literal bytes (0).  Where none of pglz_decompress's end checks
 * can stop the group (the input has room for 8 items of at most 3 bytes,
 * the output for 8 items of at most 18 bytes, and for a longer match when
 * one comes), the literals between two matches are moved together (the
 * count of zero bits up to the next 1), one branch per run instead of one
 * per byte, and matches 8 bytes at a time; moves may write up to 15 bytes
 * past their end, within that room, into bytes written again later.
 * Elsewhere, and for the rest of a group where a long match does not fit,
 * items are decoded one by one, exactly as pglz_decompress does.
 */
#define FAST_IN (8 * 3 + 8)
#define FAST_OUT (8 * 18 + 16)
#define FAST_LONG_OUT (273 + 7 * 18 + 16)

/* For a pattern of off < 8 bytes: the smallest multiple of off >= 8. */
static const int8 pattern_step[8] = {0, 8, 8, 9, 8, 10, 12, 14};

static bool
decode_pglz(const unsigned char *sp, const unsigned char *srcend, unsigned char *dest,
			int32 rawsize)
{
	unsigned char *dp = dest;
	unsigned char *const destend = dest + rawsize;

	while (sp < srcend && dp < destend)
	{
		unsigned int ctrl = *sp++;
		int			items = 8;

		if (srcend - sp >= FAST_IN && destend - dp >= FAST_OUT)
		{
			/* a 1 past the 8 bits ends the last run of literals */
			unsigned int bits = ctrl | 0x100;

			for (;;)
			{
				int			nlit = pg_rightmost_one_pos32(bits);
				int32		len;
				int32		off;

				memcpy(dp, sp, 8);
				dp += nlit;
				sp += nlit;
				items -= nlit;
				bits >>= nlit;
				if (items == 0)
					break;
				/* a match; a long one only where it fits */
				if ((sp[0] & 0x0f) == 0x0f && destend - dp < FAST_LONG_OUT)
					break;
				len = (sp[0] & 0x0f) + 3;
				off = ((sp[0] & 0xf0) << 4) | sp[1];
				sp += 2;
				if (len == 18)
					len += *sp++;
				if (off == 0 || off > dp - dest)
					return false;
				if (off >= 8)
				{
					/* each 8 bytes read lie before the 8 written */
					memcpy(dp, dp - off, 8);
					memcpy(dp + 8, dp + 8 - off, 8);
					for (int32 i = 16; i < len; i += 8)
						memcpy(dp + i, dp - off + i, 8);
				}
				else
				{
					/*
					 * A pattern repeating every off < 8 bytes: its first 8
					 * bytes one by one, then 8 at a time from a whole number
					 * of periods back, at least 8 bytes (pattern_step).
					 */
					int32		step = pattern_step[off];

					for (int32 i = 0; i < 8; i++)
						dp[i] = dp[i - off];
					for (int32 i = 8; i < len; i += 8)
						memcpy(dp + i, dp + i - step, 8);
				}
				dp += len;
				bits >>= 1;
				if (--items == 0)
					break;
			}
			/* the items left, if a long match did not fit */
			ctrl = bits;
		}

		for (; items > 0 && sp < srcend && dp < destend; items--)
		{
			if (ctrl & 1)
			{
				int32		len;
				int32		off;

				if (srcend - sp < 2)
					return false;
				len = (sp[0] & 0x0f) + 3;
				off = ((sp[0] & 0xf0) << 4) | sp[1];
				sp += 2;
				if (len == 18)
				{
					if (sp >= srcend)
						return false;
					len += *sp++;
				}
				if (off == 0 || off > dp - dest)
					return false;
				len = Min(len, destend - dp);
				for (int32 i = 0; i < len; i++)
					dp[i] = dp[i - off];
				dp += len;
			}
			else
				*dp++ = *sp++;
			ctrl >>= 1;
		}
	}
	return dp == destend && sp == srcend;
}

/*
 * A document's tokens detoasted, as PG_DETOAST_DATUM does it: a pglz
 * compressed value (in line or out of line) by decode_pglz, anything else
 * by PostgreSQL.  The result is palloc'd in the current memory context
 * unless the datum needed no detoasting.
 */
struct varlena *
gnb_detoast_tokens(Datum datum)
{
	struct varlena *attr = (struct varlena *) DatumGetPointer(datum);
	struct varlena *compressed;
	struct varlena *result;
	int32		rawsize;

	if (!VARATT_IS_EXTENDED(attr))
		return attr;
	compressed = VARATT_IS_EXTERNAL_ONDISK(attr) ? detoast_external_attr(attr) : attr;
	if (!VARATT_IS_COMPRESSED(compressed) ||
		VARDATA_COMPRESSED_GET_COMPRESS_METHOD(compressed) != TOAST_PGLZ_COMPRESSION_ID)
		return PG_DETOAST_DATUM(PointerGetDatum(compressed));

	rawsize = VARDATA_COMPRESSED_GET_EXTSIZE(compressed);
	result = palloc_extended(VARHDRSZ + (Size) rawsize, MCXT_ALLOC_HUGE);
	if (!decode_pglz((const unsigned char *) compressed + VARHDRSZ_COMPRESSED,
					 (const unsigned char *) compressed + VARSIZE(compressed),
					 (unsigned char *) VARDATA(result), rawsize))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg_internal("compressed pglz data is corrupt")));
	SET_VARSIZE(result, VARHDRSZ + rawsize);
	if (compressed != attr)
		pfree(compressed);
	return result;
}

/*
 * Values of a model's packed row (its vocabulary and log theta-hat, a few
 * MB each, stored out of line uncompressed: STORAGE EXTERNAL) detoasted
 * together into one allocation of gnb_alloc_huge, for a load to read once
 * and free: values[i] goes to out[i]; the result is what to pfree.  As
 * detoast_external_attr does it, the chunks fetched from the toast table
 * straight into place, but into memory the kernel may back with huge pages:
 * in a new process (a parallel worker loading the model) each page of 4 kB
 * written is a fault, which for these 6 MB was a third of its load.  A
 * value stored otherwise (in line, or compressed) is detoasted by
 * PostgreSQL and copied.
 */
void *
gnb_detoast_together(int n, const Datum *values, struct varlena **out)
{
	struct varlena *plain[GNB_DETOAST_TOGETHER_MAX];
	struct varatt_external ext[GNB_DETOAST_TOGETHER_MAX];
	Size		offset[GNB_DETOAST_TOGETHER_MAX];
	Size		total = 0;
	void	   *chunk;
	char	   *region;

	Assert(n <= GNB_DETOAST_TOGETHER_MAX);
	for (int i = 0; i < n; i++)
	{
		struct varlena *attr = (struct varlena *) DatumGetPointer(values[i]);
		Size		size;

		plain[i] = NULL;
		if (VARATT_IS_EXTERNAL_ONDISK(attr))
		{
			VARATT_EXTERNAL_GET_POINTER(ext[i], attr);
			if (VARATT_EXTERNAL_IS_COMPRESSED(ext[i]))
				plain[i] = detoast_attr(attr);
		}
		else
			plain[i] = PG_DETOAST_DATUM(values[i]);
		size = plain[i] ? VARSIZE(plain[i]) : VARATT_EXTERNAL_GET_EXTSIZE(ext[i]) + VARHDRSZ;
		offset[i] = total;
		total += MAXALIGN(size);
	}

	region = gnb_alloc_huge(Max(total, 1), &chunk);
	for (int i = 0; i < n; i++)
	{
		out[i] = (struct varlena *) (region + offset[i]);
		if (plain[i] != NULL)
		{
			memcpy(out[i], plain[i], VARSIZE(plain[i]));
			if ((Pointer) plain[i] != DatumGetPointer(values[i]))
				pfree(plain[i]);
		}
		else
		{
			int32		attrsize = VARATT_EXTERNAL_GET_EXTSIZE(ext[i]);

			SET_VARSIZE(out[i], attrsize + VARHDRSZ);
			if (attrsize > 0)
			{
				Relation	toastrel = table_open(ext[i].va_toastrelid, AccessShareLock);

				table_relation_fetch_toast_slice(toastrel, ext[i].va_valueid, attrsize, 0,
												 attrsize, out[i]);
				table_close(toastrel, AccessShareLock);
			}
		}
	}
	return chunk;
}
