// ktx corpus sweep stub: forwards to the one stand-in header.
#pragma once
#include "ktx_torch_stub.h"
