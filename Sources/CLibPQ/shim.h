// libpq (PostgreSQL's C client) for tokensignin's Store module.
#ifndef TOKENSIGNIN_CLIBPQ_SHIM_H
#define TOKENSIGNIN_CLIBPQ_SHIM_H
#include <postgresql/libpq-fe.h>

// PG_DIAG_SQLSTATE is a character-literal macro ('C') that Swift imports awkwardly; give it a name.
static inline int CLibPQ_diagSQLState(void) { return PG_DIAG_SQLSTATE; }

#endif
