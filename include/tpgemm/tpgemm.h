// tpgemm: tensor-parallel GEMMs with the communication hidden under the compute.
#pragma once

#include "tpgemm/allreduce.h"
#include "tpgemm/error.h"
#include "tpgemm/plan.h"
#include "tpgemm/team.h"
#include "tpgemm/types.h"
