// Builders of the indexer kernels (internal to kernels_src; use KernelCatalog.h).
#pragma once

#include "dsl/Builder.h"
#include "kernels_src/KernelCatalog.h"

namespace m3idx::kernels {

StatusOr<dsl::Kernel> buildScoreDecode(const KernelConfig &c);
StatusOr<dsl::Kernel> buildScorePrefill(const KernelConfig &c);
StatusOr<dsl::Kernel> buildTopkDecode(const KernelConfig &c);
StatusOr<dsl::Kernel> buildTopkPrefill(const KernelConfig &c);

} // namespace m3idx::kernels
