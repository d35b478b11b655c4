/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The plugin's log. stdout belongs to the result or the error object, so
 * lines go to stderr, or to the config's logFile once the config is read.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/time.h>
#include "podinject_util.h"
#include "cni.h"

static FILE *log_fp;
static int log_level = PI_LOG_WARN;
static const char *log_cmd = "?";
static const char *log_cid = "";

static const char *const level_names[] = { "error", "warn", "info", "debug" };

#define STEPS_MAX	12
static struct {
	const char *name;
	long long us;
} steps[STEPS_MAX];
static int nsteps;

void cni_step(const char *name)
{
	if (nsteps < STEPS_MAX)
		steps[nsteps++] = (typeof(steps[0])){ name, pi_mono_ns() / 1000 };
}

/* "took 2.31 ms: conf 0.05, pair 0.40, ...": each step from the end of
 * the one before; the first step is the start. */
void cni_log_steps(void)
{
	char line[512];
	int len;

	if (nsteps < 2 || log_level < PI_LOG_DEBUG)
		return;
	len = snprintf(line, sizeof(line), "took %.2f ms:",
		       (steps[nsteps - 1].us - steps[0].us) / 1000.0);
	for (int i = 1; i < nsteps && len < (int)sizeof(line); i++)
		len += snprintf(line + len, sizeof(line) - len, "%s %s %.2f",
				i > 1 ? "," : "", steps[i].name,
				(steps[i].us - steps[i - 1].us) / 1000.0);
	cni_log(PI_LOG_DEBUG, "%s", line);
}

void cni_log(int level, const char *fmt, ...)
{
	FILE *fp = log_fp ? log_fp : stderr;
	struct timeval tv;
	struct tm tm;
	char ts[32];
	va_list ap;

	if (level > log_level)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(fp, "%s.%03ldZ podinject-cni[%d] %s %s %.12s: ", ts,
		(long)tv.tv_usec / 1000, (int)getpid(),
		level_names[level < 0 ? 0 : level > 3 ? 3 : level], log_cmd,
		log_cid);
	va_start(ap, fmt);
	vfprintf(fp, fmt, ap);
	va_end(ap);
	fputc('\n', fp);
	fflush(fp);
}

void cni_log_context(const char *cmd, const char *container_id)
{
	log_cmd = cmd;
	log_cid = container_id ? container_id : "";
}

void cni_log_open(const struct cni_conf *c)
{
	if (c->log_file && *c->log_file) {
		log_fp = fopen(c->log_file, "ae");
		if (!log_fp)
			cni_log(PI_LOG_WARN, "cannot open log file %s: %s",
				c->log_file, strerror(errno));
	}
	if (c->log_level >= 0)
		log_level = c->log_level;
	else
		log_level = log_fp ? PI_LOG_INFO : PI_LOG_WARN;
}

void cni_log_to(FILE *fp, int level)
{
	log_fp = fp;
	log_level = level;
}

int cni_log_level_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (!strcasecmp(name, level_names[i]))
			return i;
	return -1;
}
