/* hetrain: the whole public API. */
#ifndef HETRAIN_H
#define HETRAIN_H
#include "hetrain/core.h"
#include "hetrain/tensor.h"
#include "hetrain/codec.h"
#include "hetrain/nn.h"
#include "hetrain/netfile.h"
#include "hetrain/optim.h"
#include "hetrain/batch.h"
#include "hetrain/ckpt.h"
#include "hetrain/config.h"
#include "hetrain/data.h"
#include "hetrain/train.h"
#include "hetrain/comm.h"
#endif
