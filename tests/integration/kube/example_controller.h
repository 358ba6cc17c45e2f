#pragma once

#include <stop_token>

#include "kube/client.h"

void run_node_labeler(gpufleet::kube::Client& client, std::stop_token stop);
