// libpq (PostgreSQL's C client) for tokensignin's Store module.
#ifndef TOKENSIGNIN_CLIBPQ_SHIM_H
#define TOKENSIGNIN_CLIBPQ_SHIM_H
#include <postgresql/libpq-fe.h>
#include <dirent.h>
#include <stdio.h>

// PG_DIAG_SQLSTATE is a character-literal macro ('C') that Swift imports awkwardly; give it a name.
static inline int CLibPQ_diagSQLState(void) { return PG_DIAG_SQLSTATE; }

// PG_DIAG_MESSAGE_PRIMARY ('M'): the one-line message without DETAIL, which may echo row values.
static inline int CLibPQ_diagMessagePrimary(void) { return PG_DIAG_MESSAGE_PRIMARY; }

// PG_DIAG_CONSTRAINT_NAME ('n'): which constraint a violation hit, for logs and callers.
static inline int CLibPQ_diagConstraintName(void) { return PG_DIAG_CONSTRAINT_NAME; }

// libpq's default notice processor prints NOTICEs to stderr; Store drops them (they are not errors).
static inline void CLibPQ_ignoreNotice(void *arg, const char *message) { (void)arg; (void)message; }
static inline void CLibPQ_silenceNotices(PGconn *conn) { PQsetNoticeProcessor(conn, CLibPQ_ignoreNotice, NULL); }

// The Migrator lists sql/ without Foundation; struct dirent's d_name imports as a fixed-size tuple.
static inline const char *CLibPQ_direntName(const struct dirent *entry) { return entry->d_name; }

#endif
