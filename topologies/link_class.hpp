// topologies/link_class.hpp — the classes of links a cluster is made of.
//
// Owns: LinkClass and kNumLinkClasses, kept apart from cluster.hpp so that step timings can carry
// per-class figures without including the graph. Names: to_string(LinkClass) in cluster.hpp.
#pragma once

namespace shardsim {

// Link classes, used to report load and contention by class.
enum class LinkClass { NvLink, NicLink, LeafSpine, SpineCore, Torus, DragonflyLocal, DragonflyGlobal };
inline constexpr int kNumLinkClasses = 7;  // LinkClass::NvLink .. LinkClass::DragonflyGlobal

}  // namespace shardsim
