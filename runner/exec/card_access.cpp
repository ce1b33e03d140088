#include "exec/card_access.h"

#include <acl/libacl.h>
#include <sys/acl.h>

#include <cerrno>
#include <cstring>

namespace pto {

namespace {

/// The ACL_USER entry of `uid` in `acl`, or null.
acl_entry_t user_entry(acl_t acl, uid_t uid) {
  acl_entry_t e;
  for (int id = ACL_FIRST_ENTRY; acl_get_entry(acl, id, &e) == 1; id = ACL_NEXT_ENTRY) {
    acl_tag_t tag;
    if (acl_get_tag_type(e, &tag) != 0 || tag != ACL_USER) continue;
    auto* q = static_cast<uid_t*>(acl_get_qualifier(e));
    const bool match = q && *q == uid;
    acl_free(q);
    if (match) return e;
  }
  return nullptr;
}

std::string change(const std::string& file, uid_t uid, bool grant) {
  acl_t acl = acl_get_file(file.c_str(), ACL_TYPE_ACCESS);
  if (!acl && errno == ENOENT) return "";  // no such card file here
  if (!acl) return file + ": cannot read its ACL: " + std::strerror(errno);
  std::string error;
  acl_entry_t e = user_entry(acl, uid);
  if (!grant && !e) {  // nothing to take back: the file is not written (a user given back revokes every card's)
    acl_free(acl);
    return "";
  }
  if (grant) {
    if (!e && acl_create_entry(&acl, &e) == 0) {
      acl_set_tag_type(e, ACL_USER);
      acl_set_qualifier(e, &uid);
    }
    acl_permset_t perms;
    if (!e || acl_get_permset(e, &perms) != 0) {
      error = file + ": cannot add an ACL entry";
    } else {
      acl_clear_perms(perms);
      acl_add_perm(perms, ACL_READ);
      acl_add_perm(perms, ACL_WRITE);
      acl_set_permset(e, perms);
    }
  } else if (e) {
    acl_delete_entry(acl, e);
  }
  if (error.empty() && (acl_calc_mask(&acl) != 0 || acl_set_file(file.c_str(), ACL_TYPE_ACCESS, acl) != 0))
    error = file + ": cannot set its ACL: " + std::strerror(errno);
  acl_free(acl);
  return error;
}

std::string change_all(const std::vector<std::string>& files, uid_t uid, bool grant) {
  std::string first;
  for (const auto& f : files)
    if (std::string e = change(f, uid, grant); !e.empty() && first.empty()) first = e;
  return first;
}

}  // namespace

std::string grant_file_access(const std::vector<std::string>& files, uid_t uid) { return change_all(files, uid, true); }
std::string revoke_file_access(const std::vector<std::string>& files, uid_t uid) { return change_all(files, uid, false); }

bool has_file_access(const std::string& file, uid_t uid) {
  acl_t acl = acl_get_file(file.c_str(), ACL_TYPE_ACCESS);
  if (!acl) return false;
  const bool has = user_entry(acl, uid) != nullptr;
  acl_free(acl);
  return has;
}

}  // namespace pto
