"""Identity: researchers' own logins from the cluster's directory.

One module per output, pure renderers (no Pulumi) except the component:

    ldif       RFC 2849 LDIF lines and RFC 4514 DNs: every value the directory gets goes through them
    names      object names, ports and DNs every other module (and the Slurm operators) use
    entries    the directory's entries: base tree, read-only account and its ACL, researchers and groups
    schema     the openssh-lpk schema (sshPublicKey), added to new and existing directories
    clients    what a Slurm pod reads the directory with: ldap.conf, nslcd.conf, sssd.conf, sshd's settings
    server     the OpenLDAP StatefulSet and Service
    reconciler the Job that makes the live directory follow the config on every up
    directory  the component declaring all of it (LdapDirectory)

Numbers (uidNumber, gidNumber) are the config's (components/config/identity.py): pinned or derived
from the name, never from an order.
"""
