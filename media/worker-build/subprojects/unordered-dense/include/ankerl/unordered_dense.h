// ankerl::unordered_dense (not packaged by Debian) aliased to the standard containers. mediasoup uses only `map`,
// `set` and `hash` with the standard interface, so the aliases compile and behave the same (slower, not different).
#ifndef REGISTRY_ANKERL_UNORDERED_DENSE_SHIM_H
#define REGISTRY_ANKERL_UNORDERED_DENSE_SHIM_H

#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace ankerl::unordered_dense
{
	template<class T>
	using hash = std::hash<T>;

	template<
	  class Key,
	  class T,
	  class Hash      = hash<Key>,
	  class KeyEqual  = std::equal_to<Key>,
	  class Allocator = std::allocator<std::pair<const Key, T>>>
	using map = std::unordered_map<Key, T, Hash, KeyEqual, Allocator>;

	template<class Key, class Hash = hash<Key>, class KeyEqual = std::equal_to<Key>, class Allocator = std::allocator<Key>>
	using set = std::unordered_set<Key, Hash, KeyEqual, Allocator>;
} // namespace ankerl::unordered_dense

#endif
