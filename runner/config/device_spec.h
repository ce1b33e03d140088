#pragma once
// The `--devices` and `--device-groups` spellings: `8` (ids 0-7), `0-7`, `0,1,4,5`, `0-3,6`; groups `0,1;2,3`.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pto {

/// Parses a device list; on failure returns nothing and sets `error` to what was wrong.
std::optional<std::vector<int>> parse_device_spec(const std::string& spec, std::string& error);
/// A list of card ids, every spelling of them in one place: `3`, `2,3`, `0-7`, `0-3,6` (a lone number is an
/// id, not a count: task-submit's --device, TASK_DEVICE, Slurm's GRES indices). Ascending, without repeats.
std::optional<std::vector<int>> parse_card_list(const std::string& list, std::string& error);
/// `--devices` with card types: `a2a3:0-7,a5:8-9` (a type prefix applies to its item and the untyped items
/// after it, until the next prefix). Without any `TYPE:` it is parse_device_spec and `types` stays empty.
std::optional<std::vector<int>> parse_typed_devices(const std::string& spec, std::map<int, std::string>& types, std::string& error);
std::optional<std::vector<std::vector<int>>> parse_device_groups(const std::string& spec, std::string& error);

/// Checks groups against ids: every grouped id exists and no id is in two groups. Returns "" when valid.
std::string check_device_groups(const std::vector<int>& ids, const std::vector<std::vector<int>>& groups);

/// The largest request the pool can ever satisfy: the pool size, or the largest group when groups exist.
int largest_gang(const std::vector<int>& ids, const std::vector<std::vector<int>>& groups);

std::string join_ids(const std::vector<int>& ids, const char* sep = ",");
/// "card 3", "cards 2,3", "no card": how verdicts name cards.
std::string cards_phrase(const std::vector<int>& cards);

}  // namespace pto
